"""`python -m aura render`: parameters stay strings, and a kernel that dies at start-up is retried."""
import json
import os
import subprocess
import sys

import nbformat
import pytest
from papermill.exceptions import PapermillExecutionError

from aura.pipeline.render import is_kernel_startup_failure, render
from notebook_fixture import report_notebook

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


def _cells(path):
    """An executed notebook's cells without what differs on every run (papermill's timings, the injected cell's
    random id)."""
    return [{k: v for k, v in cell.items() if k not in ("id", "metadata")} for cell in json.loads(path.read_text())["cells"]]


def test_the_in_process_kernel_gives_what_a_kernel_process_gives(tmp_path):
    """The same notebook in a kernel process and in this process: the same figure bytes, table, printed lines,
    rich outputs, execution counts and language_info."""
    nb = report_notebook(
        'out_png = "x.png"\nout_pdf = "x.pdf"\ntable = "t.md"',
        'import matplotlib\nmatplotlib.use("Agg")\nimport matplotlib.pyplot as plt\nimport pandas as pd\nimport sys\n'
        'print("one line")\nprint("a warning", file=sys.stderr)\ndf = pd.DataFrame({"m": ["a", "b"], "rate": [0.25, 0.5]})\n'
        'df',
        # wide: a terminal would shorten its text to "[2 rows x 18 columns]"
        'pd.DataFrame({f"column_{i}": [i / 7, i * 1000.5] for i in range(18)})',
        'from aura.notebook_helpers import bars, save, write_table\n'
        'fig = bars(df["m"], [("rate", "#d62728", df["rate"], None, None)], "Rate (%)", title="t")\n'
        'save(fig, out_pdf, out_png)\nwrite_table(df, "t", ".")\nprint(open(table).read())')
    results = {}
    for kernel in ("process", "in-process"):
        folder = tmp_path / kernel
        folder.mkdir()
        nbformat.write(nb, folder / "nb.ipynb")
        out = folder / "ran.ipynb"
        cwd = os.getcwd()
        try:
            os.chdir(folder)
            assert render(folder / "nb.ipynb", out, {"out_png": "x.png", "out_pdf": "x.pdf", "table": "t.md"},
                          kernel=kernel) == 1
        finally:
            os.chdir(cwd)
        results[kernel] = {name: (folder / name).read_bytes() for name in ("x.png", "x.pdf", "t.md", "t.csv")}
        results[kernel]["cells"] = _cells(out)
        results[kernel]["language_info"] = json.loads(out.read_text())["metadata"]["language_info"]
    assert results["process"] == results["in-process"]
    outputs = results["in-process"]["cells"][2]["outputs"]
    assert [o.get("name", o["output_type"]) for o in outputs] == ["stdout", "stderr", "execute_result"]
    assert "column_17" in "".join(results["in-process"]["cells"][3]["outputs"][0]["data"]["text/plain"])
    assert results["in-process"]["cells"][4]["outputs"][0]["text"]  # the table, printed


def test_an_unknown_kernel_is_refused(tmp_path):
    with pytest.raises(ValueError, match="kernel"):
        render(tmp_path / "a.ipynb", tmp_path / "b.ipynb", {}, kernel="remote", execute=Flaky(0, STARTUP))


def test_a_render_runs_below_the_model_calls_cpu_priority():
    # nice 19, the lowest priority, whatever the process had (pytest's own may be reniced by in-process renders)
    code = "import os; from aura.pipeline.render import yield_the_cpu; yield_the_cpu(); print(os.nice(0))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["19"]


def test_an_in_process_render_leaves_no_ipython_shell_behind(tmp_path):
    from IPython import get_ipython

    nb = report_notebook('x = "1"', 'print(int(x) + 1)')
    nbformat.write(nb, tmp_path / "nb.ipynb")
    render(tmp_path / "nb.ipynb", tmp_path / "ran.ipynb", {"x": "2"})
    assert "3" in (tmp_path / "ran.ipynb").read_text()
    assert get_ipython() is None  # inspect_ai and others would take this process for a notebook
