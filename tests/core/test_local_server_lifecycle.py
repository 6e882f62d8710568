"""No orphans (issue 8 §4) and one shared server per run (issue 9), with real processes: a job is a
child Python process that takes a lease on the embedded llama.cpp server; a Snakemake run is stood
in for by a `sleep` process whose pid the jobs get in AURA_RUN_PID (as the Snakefile sets it)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from aura.llm.local_server import RUN_PID_ENV, alive, settings_key
from aura.config import load_config
from conftest import REPO

pytestmark = pytest.mark.llama
GONE_WITHIN_S = 15.0  # a bound on how long a dead holder's server may linger (it polls 4x a second)

JOB = r"""
import json, sys, time
from pathlib import Path
from aura.config import load_config
from aura.llm.local_server import LocalServer
cfg = load_config(sys.argv[1]).endpoints["local"].local.model_copy(update={"shared": sys.argv[3] == "shared"})
server = LocalServer(cfg, Path(sys.argv[2])).start()
print(json.dumps({"pid": server.pid, "port": server.port, "reused": server.reused}), flush=True)
if sys.argv[4] == "stay":
    time.sleep(600)
server.stop()
"""


def job(registry, mode: str, then: str, run_pid: int | None = None):
    env = {k: v for k, v in os.environ.items() if k != RUN_PID_ENV}
    if run_pid is not None:
        env[RUN_PID_ENV] = str(run_pid)
    proc = subprocess.Popen([sys.executable, "-c", JOB, str(REPO / "config/config.yaml"), str(registry), mode, then],
                            stdout=subprocess.PIPE, text=True, env=env)
    info = json.loads(proc.stdout.readline())
    info["tree"] = tree(info["pid"])  # the server process and what it runs (a compiled llama-server under its keeper)
    return proc, info


def tree(pid: int) -> list[int]:
    """A process and its descendants (Linux /proc); a process or thread that exits meanwhile has none."""
    out = [pid]
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            children = (task / "children").read_text().split()
        except OSError:
            continue
        for child in children:
            out += tree(int(child))
    return out


def gone(pids: int | list[int], within: float = GONE_WITHIN_S) -> bool:
    """Every one of `pids` has exited within `within` seconds."""
    pids = [pids] if isinstance(pids, int) else pids
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if not any(alive(p) for p in pids):
            return True
        time.sleep(0.1)
    return False


@pytest.fixture
def run_process():
    proc = subprocess.Popen(["sleep", "600"])
    yield proc
    proc.kill()
    proc.wait()


def test_per_job_server_dies_with_its_killed_job(tmp_path):
    proc, info = job(tmp_path / "servers", "per-job", "stay")
    assert alive(info["pid"])
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert gone(info["tree"]), "per-job server outlived its SIGKILLed job"


def test_shared_server_dies_when_its_only_job_is_killed(tmp_path):
    proc, info = job(tmp_path / "servers", "shared", "stay")
    registry = next((tmp_path / "servers").iterdir())
    assert json.loads((registry / "server.json").read_text())["pid"] == info["pid"]
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert gone(info["tree"]), "shared server outlived its only (SIGKILLed) job"
    assert not (registry / "server.json").exists()


def test_one_shared_server_for_the_run_stopped_when_the_run_is_killed(tmp_path, run_process):
    registry = tmp_path / "servers"
    first, a = job(registry, "shared", "leave", run_pid=run_process.pid)
    assert first.wait(timeout=60) == 0 and not a["reused"]
    assert alive(a["pid"]), "the run still holds a lease: the server waits for the next job"
    second, b = job(registry, "shared", "leave", run_pid=run_process.pid)
    assert second.wait(timeout=60) == 0
    assert (b["pid"], b["port"], b["reused"]) == (a["pid"], a["port"], True)  # one start for two jobs
    run_process.send_signal(signal.SIGKILL)  # Snakemake killed between jobs
    run_process.wait()
    assert gone(a["tree"]), "shared server outlived its killed run"


SLOW_JOB = r"""
import json, sys, time
from pathlib import Path
from aura.config import load_config
from aura.llm.errors import terminate_raises
from aura.llm.local_server import LocalServer

class Slow(LocalServer):  # the server is launched; the job is stopped while it waits for it to be ready
    def _wait_ready(self, timeout):
        print(json.dumps({"pid": self.pid}), flush=True)
        time.sleep(600)

cfg = load_config(sys.argv[1]).endpoints["local"].local.model_copy(update={"shared": True})
with terminate_raises():
    Slow(cfg, Path(sys.argv[2])).start()
"""


def test_a_job_stopped_while_its_server_starts_leaves_no_server(tmp_path, run_process):
    # shared mode under a run: the run's lease would keep a server nobody registered alive until the run ends
    env = {**{k: v for k, v in os.environ.items() if k != RUN_PID_ENV}, RUN_PID_ENV: str(run_process.pid)}
    proc = subprocess.Popen([sys.executable, "-c", SLOW_JOB, str(REPO / "config/config.yaml"), str(tmp_path / "servers")],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    pid = json.loads(proc.stdout.readline())["pid"]
    assert alive(pid)
    time.sleep(1.0)  # the server process is loading the engine by now
    procs = tree(pid)
    proc.send_signal(signal.SIGTERM)  # as Snakemake stops a job
    proc.wait(30)
    assert gone(procs), "a server launched by a job stopped during its startup outlived the job"


def test_last_job_out_stops_the_server_when_no_run_holds_it(tmp_path):
    proc, info = job(tmp_path / "servers", "shared", "leave")
    assert proc.wait(timeout=60) == 0
    assert not alive(info["pid"]), "stop() of the last holder returns only once the server is gone"
    assert gone(info["tree"]), "the engine outlived its server process"


def test_the_engine_dies_with_its_lease_keeper(tmp_path):
    # the compiled llama-server runs under a small lease-keeping process, the wheel's server on threads of its
    # server process: either way a SIGKILL of that process leaves no engine and no open port
    proc, info = job(tmp_path / "servers", "private", "stay")
    try:
        assert all(alive(p) for p in info["tree"])
        assert answers(info["port"])
        os.kill(info["pid"], signal.SIGKILL)
        assert gone(info["tree"]), "the engine outlived its SIGKILLed server process"
        # a thread group's leader reads as a zombie while its other threads still exit, holding the socket
        deadline = time.monotonic() + GONE_WITHIN_S
        while answers(info["port"]) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not answers(info["port"]), "the engine's port is still served"
    finally:
        proc.kill()
        proc.wait()


def answers(port: int) -> bool:
    """Something accepts connections on the port (127.0.0.1)."""
    import socket

    with socket.socket() as s:
        s.settimeout(2)
        return s.connect_ex(("127.0.0.1", port)) == 0


def test_shared_servers_are_keyed_by_their_settings():
    cfg = load_config(REPO / "config/config.yaml").endpoints["local"].local
    assert settings_key(cfg) == settings_key(cfg.model_copy(update={"startup_timeout_s": 1.0, "shared": False}))
    assert settings_key(cfg) != settings_key(cfg.model_copy(update={"n_ctx": cfg.n_ctx * 2}))
