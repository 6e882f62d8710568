"""`python -m aura render`: parameters stay strings, and a kernel that dies at start-up is retried."""
import json
import subprocess
import sys

import nbformat
import pytest
from papermill.exceptions import PapermillExecutionError

from aura.pipeline.render import is_kernel_startup_failure, render

STARTUP = RuntimeError("Kernel died before replying to kernel_info")


class Flaky:
    """Stands in for papermill.execute_notebook: fails the first `fail` calls with `exc`."""

    def __init__(self, fail, exc):
        self.fail, self.exc, self.calls = fail, exc, 0

    def __call__(self, notebook, executed, **kwargs):
        self.calls += 1
        if self.calls <= self.fail:
            raise self.exc


def test_startup_failure_is_retried_with_a_new_kernel(tmp_path, capsys):
    ex = Flaky(fail=2, exc=STARTUP)
    assert render(tmp_path / "a.ipynb", tmp_path / "b.ipynb", {}, execute=ex, wait_s=0) == 3
    assert ex.calls == 3
    assert capsys.readouterr().err.count("kernel failed to start") == 2


def test_startup_failure_gives_up_after_the_last_attempt(tmp_path):
    ex = Flaky(fail=5, exc=STARTUP)
    with pytest.raises(RuntimeError, match="kernel_info"):
        render(tmp_path / "a.ipynb", tmp_path / "b.ipynb", {}, attempts=3, execute=ex, wait_s=0)
    assert ex.calls == 3


def test_a_failing_cell_is_not_retried(tmp_path):
    err = PapermillExecutionError(0, 1, "boom", "ValueError", "boom", [])
    ex = Flaky(fail=1, exc=err)
    assert not is_kernel_startup_failure(err)
    with pytest.raises(PapermillExecutionError):
        render(tmp_path / "a.ipynb", tmp_path / "b.ipynb", {}, execute=ex, wait_s=0)
    assert ex.calls == 1


def test_render_runs_a_real_notebook_with_string_parameters(tmp_path):
    nb = nbformat.v4.new_notebook()
    params = nbformat.v4.new_code_cell('path = "x"\nflag = "y"')
    params.metadata["tags"] = ["parameters"]
    body = nbformat.v4.new_code_cell(
        "import json, pathlib\npathlib.Path(path).write_text(json.dumps([path, flag]))")
    nb.cells = [params, body]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    src = tmp_path / "nb.ipynb"
    nbformat.write(nb, src)
    out = tmp_path / "1e3"  # papermill's own CLI would turn this into the float 1000.0
    proc = subprocess.run([sys.executable, "-m", "aura", "render", str(src), str(tmp_path / "ran.ipynb"),
                           "-p", "path", str(out), "-p", "flag", "True"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(out.read_text()) == [str(out), "True"]
    assert (tmp_path / "ran.ipynb").exists()
