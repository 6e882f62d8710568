"""The run's job server (aura.pipeline.jobserver): `python -m aura ...` run in a forked child of one warm process
gives what the job's own process gives (outputs byte for byte, its printed lines on its own stdout / stderr, its
exit status), and a job that cannot be served runs in its own process. Real processes, a real notebook, a real
server; the "run" the server lives for is a `sleep` process of the test."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat
import pytest

from aura.pipeline import jobserver
from conftest import REPO
from notebook_fixture import report_notebook

BASE_ENV = {**os.environ, "PYTHONPATH": str(REPO / "src")}


def notebook(path: Path) -> Path:
    nb = report_notebook(
        'out_png = "x.png"\ntitle = "t"',
        'import matplotlib\nmatplotlib.use("Agg")\nimport matplotlib.pyplot as plt\nimport pandas as pd\n'
        'import sys\nprint("drawing", title)\nprint("to stderr", file=sys.stderr)\n'
        'fig, ax = plt.subplots(figsize=(3, 2))\nax.bar(["a", "b"], [1, 3])\nax.set_title(title)\n'
        'fig.savefig(out_png, dpi=100, metadata={})\npd.DataFrame({"n": [1, 2]})',
        'pd.DataFrame({f"column_{i}": [i / 7, i * 1000.5] for i in range(18)})')  # wide: text as in a kernel
    nbformat.write(nb, path)
    return path


def aura(cwd: Path, env: dict, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "aura", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)


def cells(path: Path) -> list:
    """The executed notebook's cells without what differs on every run (papermill's timings, the injected
    parameters cell's random id)."""
    nb = json.loads(path.read_text())
    out = []
    for cell in nb["cells"]:
        cell = {k: v for k, v in cell.items() if k not in ("id", "metadata")}
        out.append(cell)
    return out


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """A run (a sleep process) with its server folder; the server is started by the first job and stops with it."""
    tmp = tmp_path_factory.mktemp("jobserver")
    run = subprocess.Popen(["sleep", "600"])
    env = {**BASE_ENV, jobserver.ENV: str(tmp / "servers"), jobserver.RUN_PID_ENV: str(run.pid)}
    notebook(tmp / "nb.ipynb")
    yield tmp, env, run
    run.kill()
    run.wait()


def log_of(tmp: Path) -> str:
    return "".join(p.read_text() for p in sorted((tmp / ".snakemake" / "aura").glob("jobserver-*.log")))


def render_in(folder: Path, env: dict) -> subprocess.CompletedProcess:
    """The same command in its own folder (so the parameters, and with them the notebooks, are the same)."""
    folder.mkdir()
    notebook(folder / "nb.ipynb")
    return aura(folder, env, "render", "nb.ipynb", "ran.ipynb", "-p", "out_png", "fig.png", "-p", "title", "T")


def test_a_served_render_equals_one_in_its_own_process(served):
    tmp, env, _ = served
    own = render_in(tmp / "own", {**BASE_ENV, jobserver.ENV: "off"})
    assert own.returncode == 0, own.stderr
    first = render_in(tmp / "first", env)
    assert first.returncode == 0, first.stderr + log_of(tmp / "first")
    deadline = time.monotonic() + 240
    while "jobserver: warm after" not in log_of(tmp / "first"):  # the first job started it; it serves meanwhile
        assert time.monotonic() < deadline, log_of(tmp / "first")
        time.sleep(0.2)
    t0 = time.monotonic()
    again = render_in(tmp / "again", env)
    served_s = time.monotonic() - t0
    assert again.returncode == 0, again.stderr
    runs = [tmp / name for name in ("own", "first", "again")]
    assert len({(d / "fig.png").read_bytes() for d in runs}) == 1
    assert cells(runs[0] / "ran.ipynb") == cells(runs[1] / "ran.ipynb") == cells(runs[2] / "ran.ipynb")
    outputs = cells(runs[2] / "ran.ipynb")[2]["outputs"]
    assert [o.get("name", o["output_type"]) for o in outputs] == ["stdout", "stderr", "execute_result"]
    assert "text/html" in outputs[2]["data"]
    assert "column_17" in "".join(cells(runs[2] / "ran.ipynb")[3]["outputs"][0]["data"]["text/plain"])
    assert "jobserver: stopped" not in log_of(tmp / "first")
    print(f"served render: {served_s:.2f} s")


def test_status_and_output_reach_the_job(served):
    tmp, env, _ = served
    for e in ({**BASE_ENV, jobserver.ENV: "off"}, env):  # its own process, then a served child: the same
        bad = aura(tmp, e, "select-seeds", "--configfile", str(tmp / "missing.yaml"), "--out", "seeds=x.jsonl")
        assert bad.returncode == 2 and "missing.yaml" in bad.stderr, bad.stderr
        usage = aura(tmp, e, "no-such-stage")
        assert usage.returncode == 2 and "invalid choice: 'no-such-stage'" in usage.stderr
        ok = aura(tmp, e, "render", "--help")
        assert ok.returncode == 0 and "executed" in ok.stdout


def test_a_served_job_collects_only_what_it_made(served):
    """The server freezes what it loaded before it forks (gc.freeze): a job's collections, IPython's full one at the
    end of every render among them, walk only the job's own objects; a job in its own process freezes nothing."""
    tmp, env, _ = served
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("import gc\nprint(gc.isenabled(), gc.get_freeze_count())")]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, tmp / "gc.ipynb")
    seen = {}
    for name, e in (("own", {**BASE_ENV, jobserver.ENV: "off"}), ("served", env)):
        out = aura(tmp, e, "render", "gc.ipynb", f"gc_{name}.ipynb")
        assert out.returncode == 0, out.stderr
        text = json.loads((tmp / f"gc_{name}.ipynb").read_text())["cells"][0]["outputs"][0]["text"]
        enabled, frozen = "".join(text).split()
        seen[name] = (enabled, int(frozen))
    assert seen["own"] == ("True", 0)
    assert seen["served"][0] == "True" and seen["served"][1] > 50_000, seen  # the server's modules: ~300,000


def test_a_signal_reaches_the_served_child(served):
    """Snakemake stops a job with SIGTERM: the job's process relays it to the child, and exits as it did."""
    tmp, env, _ = served
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell('import pathlib, time\npathlib.Path("started").touch()\ntime.sleep(120)')]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, tmp / "slow.ipynb")
    proc = subprocess.Popen([sys.executable, "-m", "aura", "render", "slow.ipynb", "slow_out.ipynb"], cwd=tmp, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not (tmp / "started").exists():
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.1)
    t0 = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=60)
    assert proc.returncode in (143, -signal.SIGTERM) and time.monotonic() - t0 < 30


def test_a_killed_jobs_child_dies_with_it(served):
    """SIGKILL cannot be relayed: the child notices its job's process is gone (the connection closes) and dies
    too, so nothing of a killed job runs on."""
    tmp, env, _ = served
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell('import os, pathlib, time\npathlib.Path("child").write_text(str(os.getpid()))'
                                          '\ntime.sleep(120)')]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, tmp / "killed.ipynb")
    proc = subprocess.Popen([sys.executable, "-m", "aura", "render", "killed.ipynb", "killed_out.ipynb"], cwd=tmp,
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while not (tmp / "child").exists():
        assert proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.1)
    child = int((tmp / "child").read_text())
    assert child != proc.pid  # it runs in the server's child (the in-process kernel), not in the job's process
    proc.kill()
    proc.wait()
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and Path(f"/proc/{child}").exists() and \
            Path(f"/proc/{child}/stat").read_text().split()[2] != "Z":
        time.sleep(0.1)
    assert not Path(f"/proc/{child}").exists() or Path(f"/proc/{child}/stat").read_text().split()[2] == "Z", \
        "the served child outlived its SIGKILLed job"


def test_no_live_run_means_its_own_process(served, tmp_path):
    tmp, env, _ = served
    dead = subprocess.Popen(["true"])
    dead.wait()
    e = {**env, jobserver.ENV: str(tmp_path / "servers"), jobserver.RUN_PID_ENV: str(dead.pid)}
    out = aura(tmp, e, "render", "--help")
    assert out.returncode == 0 and not (tmp_path / "servers").exists()


def test_a_server_whose_run_is_over_stops_its_warm_up(tmp_path):
    """A short run can end before its server has imported everything: the server then imports no more (before, it
    went on for seconds of CPU through pandas, matplotlib and papermill for no job) and its folders go."""
    dead = subprocess.Popen(["true"])
    dead.wait()
    folder = tmp_path / "servers" / "key"
    folder.mkdir(parents=True)
    out = subprocess.run([sys.executable, "-m", "aura.serve_jobs", str(folder), str(dead.pid)], cwd=tmp_path,
                         env=BASE_ENV, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "jobserver: warm-up stopped at aura.cli: the run is over" in out.stdout, out.stdout
    assert "warm after" not in out.stdout and not (tmp_path / "servers").exists()


def test_a_changed_module_is_noticed(tmp_path):
    mod = tmp_path / "m.py"
    mod.write_text("x = 1\n")
    st = mod.stat()
    state = {str(mod): (st.st_mtime_ns, st.st_size)}
    assert jobserver._changed(state) is None
    mod.write_text("x = 22\n")
    assert jobserver._changed(state) == str(mod)


def test_the_server_stops_with_its_run_and_leaves_no_folder(served):
    tmp, env, run = served
    folders = list(Path(env[jobserver.ENV]).iterdir())
    assert len(folders) == 1 and (folders[0] / "socket").exists()
    run.kill()
    run.wait()
    deadline = time.monotonic() + 30
    while Path(env[jobserver.ENV]).exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not Path(env[jobserver.ENV]).exists()
    assert "jobserver: stopped after" in log_of(tmp / "first")


class Workflow:
    """What jobserver's Snakefile calls read of Snakemake's workflow object: is this the main process or a cluster job."""
    def __init__(self, main: bool):
        self.is_main_process = main


def test_a_cluster_jobs_snakemake_serves_no_job_even_with_the_submitting_runs_folder(monkeypatch):
    """sbatch exports the submitting run's environment: its AURA_JOB_SERVER must not make a cluster job's jobs
    start servers (one per job step, each importing everything for one job, each living until that run ends)."""
    monkeypatch.setenv(jobserver.ENV, "/tmp/aura-jobs-0-123-abcd")  # the submitting run's folder, inherited
    assert jobserver.run_folder(Workflow(main=False)) == "off" and os.environ[jobserver.ENV] == "off"
    monkeypatch.setenv(jobserver.ENV, "/tmp/aura-jobs-0-123-abcd")  # a main run keeps what it was given
    assert jobserver.run_folder(Workflow(main=True)) == "/tmp/aura-jobs-0-123-abcd"
    monkeypatch.delenv(jobserver.ENV)
    folder = jobserver.run_folder(Workflow(main=True))
    assert folder.startswith(tempfile.gettempdir()) and f"-{os.getpid()}-" in folder


def test_a_cluster_job_holds_the_run_itself_not_the_submitting_runs_pid(monkeypatch):
    """sbatch exports the submitting run's AURA_RUN_PID too: a cluster job's Snakemake holds the run (the leases on
    the shared embedded-model server, its job servers) with its own pid; a main run keeps a pid given to it."""
    monkeypatch.setenv(jobserver.RUN_PID_ENV, "123")  # the submitting run's, inherited
    assert jobserver.hold_run(Workflow(main=False)) == str(os.getpid()) == os.environ[jobserver.RUN_PID_ENV]
    monkeypatch.setenv(jobserver.RUN_PID_ENV, "123")  # an outer run's, given to a main run: kept
    assert jobserver.hold_run(Workflow(main=True)) == "123"
    monkeypatch.delenv(jobserver.RUN_PID_ENV)
    assert jobserver.hold_run(Workflow(main=True)) == str(os.getpid())
