"""Warm processes that run a Snakemake run's `python -m aura ...` jobs in forked children.

Every job used to start an interpreter and import the package and what it needs (the families' stages, pandas,
matplotlib, papermill, IPython): 1.5-4 s of CPU per job, most of a rebuild from a warm cache. Now the Snakefile
names a folder for the run's job servers in `AURA_JOB_SERVER` (`run_folder`; "off" in a job Snakemake runs on
another host, and when set so before snakemake starts). `python -m aura` (aura/__main__.py) asks a server first
(`run_via_server`): it sends its command line, working directory and environment, and its stdin / stdout /
stderr (the job's log files, as file descriptors); the server forks a child that takes those as its own and runs
`aura.cli.main(argv)`, what the job's own process would have run (the server's process is `python -m
aura.serve_jobs`, which hands it the CLI's `main`: this module imports nothing above it). The job's process relays
signals (SIGTERM from Snakemake, Ctrl-C) to the child and exits with the child's status. A job stays one Snakemake
job, with its own process, log, exit status and outputs; only the imports are shared, done once per run by the
server.

The first job of a run starts the server (a process of its own, in its own session), with that job's interpreter,
`sys.path` and environment; jobs whose identity or environment differ (other threads, so other
`OMP_NUM_THREADS`) get a server of their own, keyed by its hash. The server lives as long as the Snakemake
process (`AURA_RUN_PID`). A job runs in its own process, as before, whenever no server can serve it: none named,
no live Snakemake run, a server that failed to start, or a module of the package changed on disk since the
server loaded it (the server then stops). A dry run starts none (no job runs).

This module is the job's side too: at the top it imports only the standard library.
"""
from __future__ import annotations

import gc
import hashlib
import json
import os
import signal
import socket
import struct
import sys
import threading
import time
from collections.abc import Callable  # loaded by the modules above already (typing would cost a job ~11 ms)
from pathlib import Path

ENV = "AURA_JOB_SERVER"  # the run's folder of job servers; "off": every job in its own process
RUN_PID_ENV = "AURA_RUN_PID"  # the Snakemake run's pid (set by the Snakefile): a server lives while it does
START_WAIT_S = 120.0  # how long a job waits for a server that is still importing
POLL_S = 0.25  # how often a server checks that its Snakemake run still lives
# Variables that differ between two jobs of one run without changing what they run (the shell's depth and
# folders): left out of the key, still set in the child.
VOLATILE = frozenset({"SHLVL", "_", "PWD", "OLDPWD"})
_EXIT = struct.Struct("!i")
_HEADER = struct.Struct("!I")
Program = Callable[[list[str]], int]  # what a job runs: the CLI's main, given the job's argv


def _package_dir() -> str:
    return str(Path(__file__).resolve().parents[1])


def identity() -> dict:
    """What a server and a job must share for the job to run in the server's child as in its own process."""
    return {"executable": sys.executable, "path": list(sys.path[1:]), "package": _package_dir(),
            "env": {k: v for k, v in sorted(os.environ.items()) if k not in VOLATILE}}


def server_key(ident: dict) -> str:
    return hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:16]


def hold_run(workflow) -> str:
    """The Snakefile's call: the pid of the process whose life is the run's (`AURA_RUN_PID`: the job servers and the
    shared embedded-model server live while it does). A cluster job holds it itself: the pid it inherited names the
    submitting run, a process of another host or one whose life is not this job's (the embedded-model server of a
    job step then outlived it, leased by that run). A main run keeps one given to it (an outer run's)."""
    if not workflow.is_main_process:
        os.environ[RUN_PID_ENV] = str(os.getpid())
    else:
        os.environ.setdefault(RUN_PID_ENV, str(os.getpid()))
    return os.environ[RUN_PID_ENV]


def run_folder(workflow) -> str:
    """The Snakefile's call: the folder of this run's job servers (nothing is created until a job asks), or "off"
    where Snakemake runs a job of another host's run (a cluster job); set as `AURA_JOB_SERVER` for the jobs.

    A cluster job is asked first: its environment came along from the submitting run (sbatch exports it), that
    run's folder and pid included. Read as given, every job step of a SLURM job (its own SLURM_STEP_ID, so its own
    server key) started a server, imported everything to run one job, and lived until the submitting run ended;
    on another host the folder and pid mean nothing at all."""
    import secrets
    import tempfile

    if not workflow.is_main_process:
        folder = "off"
    elif os.environ.get(ENV):
        return os.environ[ENV]  # given: "off", or an outer run's
    else:  # short: a socket's path holds at most 107 bytes
        folder = str(Path(tempfile.gettempdir(), f"aura-jobs-{os.getuid()}-{os.getpid()}-{secrets.token_hex(4)}"))
    os.environ[ENV] = folder
    return folder


# ---- the job's side --------------------------------------------------------------------------------------------
def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _starting(folder: Path) -> bool:
    """The server's process lives (on this host): starting or serving."""
    try:
        pid = int((folder / "pid").read_text())
    except (OSError, ValueError):
        return False
    return _alive(pid)


def _launch(folder: Path, run_pid: int) -> None:
    """Start the server of `folder` unless one is starting or running (one job does it; the others wait)."""
    import fcntl
    import subprocess

    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    with open(folder / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _starting(folder):
            return
        log = Path(".snakemake", "aura", f"jobserver-{folder.name}.log")
        try:
            log.parent.mkdir(parents=True, exist_ok=True)
            out = open(log, "wb")
        except OSError:
            out = open(os.devnull, "wb")
        with out:
            proc = subprocess.Popen([sys.executable, "-m", "aura.serve_jobs", str(folder), str(run_pid)],
                                    stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                    start_new_session=True)
        (folder / "pid").write_text(str(proc.pid))


def _connect(base: str) -> socket.socket | None:
    """A connection to this job's server under `base`, started if need be; None when there is none to have."""
    try:
        run_pid = int(os.environ.get(RUN_PID_ENV, ""))
    except ValueError:
        return None
    if not _alive(run_pid):
        return None
    folder = Path(base, server_key(identity()))
    path = str(folder / "socket")
    deadline = time.monotonic() + START_WAIT_S
    launched = False
    while True:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(path)
            return sock
        except (FileNotFoundError, ConnectionRefusedError):
            sock.close()
        except OSError:
            sock.close()
            return None
        if not launched:
            try:
                _launch(folder, run_pid)
            except OSError:
                return None
            launched = True
        elif not _starting(folder) or time.monotonic() > deadline:
            return None
        time.sleep(0.05)


def _recv_exactly(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            break
        data += chunk
    return data


def run_via_server(argv: list[str]) -> int | None:
    """Run `python -m aura argv` in a child of the run's job server: its exit status, or None when no server
    can serve it (the caller then runs it in this process)."""
    base = os.environ.get(ENV)
    if not base or base == "off":
        return None
    sock = _connect(base)
    if sock is None:
        return None
    with sock:
        request = json.dumps({"argv": argv, "argv0": sys.argv[0], "path0": sys.path[0], "cwd": os.getcwd(),
                              "environ": dict(os.environ), **identity()}).encode()
        message = _HEADER.pack(len(request)) + request
        try:
            sent = socket.send_fds(sock, [message], [0, 1, 2])
            sock.sendall(message[sent:])
            answer = _recv_exactly(sock, 1 + _EXIT.size)
        except OSError:
            return None
        if len(answer) < 1 + _EXIT.size or answer[:1] != b"R":
            return None  # refused (stale code) or gone before it forked: run here
        child = _EXIT.unpack(answer[1:])[0]
        relayed: list[int] = []

        def relay(signum, _frame):
            relayed.append(signum)
            try:
                os.kill(child, signum)
            except OSError:
                pass

        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT):
            signal.signal(signum, relay)
        status = _recv_exactly(sock, 1 + _EXIT.size)
        if len(status) == 1 + _EXIT.size and status[:1] == b"X":
            return _EXIT.unpack(status[1:])[0]
        if relayed:  # the child died of the signal it was sent, before it could answer
            return 128 + relayed[-1]
        print(f"error: the job's process (pid {child}) ended without an exit status", file=sys.stderr)
        return 1


# ---- the server ------------------------------------------------------------------------------------------------
# What the jobs import, loaded once: the CLI, papermill with the in-process kernel, the report notebooks' modules,
# the LLM client and cache; then every registered family's stage modules and report helpers (warm_steps()).
PRELOAD = ("aura.cli", "aura.pipeline.render", "aura.pipeline.context", "aura.llm", "aura.llm.cache",
           "aura.llm.client", "aura.notebook_helpers", "papermill", "nbclient", "nbformat",
           "ipykernel.inprocess.ipkernel", "ipykernel.inprocess.blocking", "ipykernel.inprocess.manager",
           "pandas", "numpy", "matplotlib", "matplotlib.pyplot", "matplotlib.backends.backend_agg",
           "matplotlib.backends.backend_pdf")


def warm_steps(prepare: Callable[[], object]) -> list[tuple[str, bool]]:
    """What to import, in the order the jobs of a run need it: (module, optional). The CLI and the stages first
    (the first jobs are the bookkeeping ones), then the LLM client, then pandas, matplotlib and papermill (the
    statistics and the renders come last). `prepare()` imports what the jobs' program needs first (the CLI's
    parser: the commands' modules)."""
    steps = [("aura.cli", False), ("aura.pipeline.context", False)]
    try:
        from aura.families import _entry_points
        from aura.pipeline.registry import STAGES

        prepare()
        stages = sorted({stage.target.partition(":")[0] for stage in STAGES.values()})
        helpers = sorted({f"{ep.module}.notebooks" for ep in _entry_points().values()})
    except Exception as exc:  # noqa: BLE001 - the jobs then say what is wrong, each in its own process
        print(f"jobserver: the registry: {type(exc).__name__}: {exc}", flush=True)
        stages, helpers = [], []
    steps += [(name, False) for name in stages]
    steps += [(name, False) for name in PRELOAD if name not in ("aura.cli", "aura.pipeline.context")]
    steps += [(name, True) for name in helpers]
    return steps


def load(name: str, optional: bool = False) -> str | None:
    """Import one module; what went wrong, or None (a module that failed here is imported by the job itself)."""
    import importlib

    try:
        importlib.import_module(name)
        if name == "aura.pipeline.render":
            from aura.pipeline.render import in_process_kernel_manager

            in_process_kernel_manager()
    except ModuleNotFoundError as exc:
        if not (optional and exc.name == name):
            return f"{name}: {exc}"
    except Exception as exc:  # noqa: BLE001 - a warm-up import is an optimisation, never a failure
        return f"{name}: {type(exc).__name__}: {exc}"
    return None


def code_state() -> dict[str, tuple[int, int]]:
    """(mtime, size) of every loaded module's file inside the package: a job must run the code on disk."""
    root = _package_dir()
    state = {}
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        if path and path.startswith(root):
            try:
                st = os.stat(path)
            except OSError:
                continue
            state[path] = (st.st_mtime_ns, st.st_size)
    return state


def _changed(state: dict[str, tuple[int, int]]) -> str | None:
    for path, seen in state.items():
        try:
            st = os.stat(path)
        except OSError:
            return path
        if (st.st_mtime_ns, st.st_size) != seen:
            return path
    return None


def _read_request(conn: socket.socket) -> tuple[dict, list[int]]:
    data, fds, _flags, _addr = socket.recv_fds(conn, 1 << 16, 3)
    try:
        if len(data) < _HEADER.size:
            raise ValueError("short request")
        size = _HEADER.unpack(data[:_HEADER.size])[0]
        body = data[_HEADER.size:]
        while len(body) < size:
            chunk = conn.recv(size - len(body))
            if not chunk:
                raise ValueError("cut-off request")
            body += chunk
        if len(fds) != 3:
            raise ValueError(f"{len(fds)} file descriptors, not 3")
        return json.loads(body), fds
    except Exception:
        for fd in fds:
            os.close(fd)
        raise


def _run_child(conn: socket.socket, request: dict, fds: list[int], program: Program) -> None:
    """In the forked child: become the job's process (its stdin/stdout/stderr, folder, environment, argv) and
    run `program(argv)` (the CLI's main); never returns."""
    code = 1
    try:
        for signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGCHLD):
            signal.signal(signum, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["environ"])
        import tempfile

        tempfile.tempdir = None  # read again from this job's environment (TMPDIR)
        sys.argv = [request["argv0"], *request["argv"]]
        sys.path[0] = request["path0"]
        conn.sendall(b"R" + _EXIT.pack(os.getpid()))
        _die_with_the_job(conn)
        code = program(request["argv"])
    except SystemExit as exc:
        code = _exit_code(exc)
    except BaseException:  # noqa: BLE001 - what an uncaught exception does to a process: traceback, status 1
        import traceback

        traceback.print_exc()
        code = 1
    finally:
        code = _finish(code)
        finished.set()
        try:
            conn.sendall(b"X" + _EXIT.pack(code))
        except OSError:
            pass
        os._exit(code)


def _die_with_the_job(conn: socket.socket) -> None:
    """The job's process keeps its end of the connection open until it has the exit status; if it closes first,
    it was killed (SIGKILL cannot be relayed): the child is killed too, as the job's own process would have been,
    so nothing of a killed job runs on (its leases, e.g. on the embedded model's server, go stale at once)."""

    def watch():
        try:
            while conn.recv(1):
                pass
        except OSError:
            pass
        if not finished.is_set():
            os.kill(os.getpid(), signal.SIGKILL)

    threading.Thread(target=watch, daemon=True, name="job-watch").start()


finished = threading.Event()  # set once the child has its exit status (then EOF is expected)


def _exit_code(exc: SystemExit) -> int:
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code
    print(exc.code, file=sys.stderr)
    return 1


def _finish(code) -> int:
    """What the interpreter does at exit: wait for the job's own threads, run its exit handlers, flush."""
    import atexit

    code = code if isinstance(code, int) else (0 if code is None else 1)
    for thread in threading.enumerate():
        if thread is not threading.main_thread() and not thread.daemon:
            thread.join()
    try:
        atexit._run_exitfuncs()
    except BaseException:  # noqa: BLE001
        pass
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):
            pass
    return code


def _reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


class Server:
    """The accept loop: each job's request forks one child; between the imports of the warm-up too (a job that
    comes early imports the rest itself)."""

    def __init__(self, folder: Path, run_pid: int, program: Program):
        self.folder, self.run_pid, self.me, self.program = folder, run_pid, os.getpid(), program
        self.own = identity()  # before any import (none may change it; a job compares its own)
        self.state: dict[str, tuple[int, int]] = {}
        self.served, self.stale = 0, False
        self.path = folder / "socket"
        self.path.unlink(missing_ok=True)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(str(self.path))
        self.sock.listen(128)

    def poll(self, timeout: float) -> None:
        """Serve every job waiting now, then wait up to `timeout` s for one more."""
        _reap()
        self.sock.settimeout(timeout)
        while not self.stale:
            try:
                conn, _ = self.sock.accept()
            except (TimeoutError, BlockingIOError):
                return
            self.handle(conn)
            self.sock.settimeout(0)

    def handle(self, conn: socket.socket) -> None:
        try:
            conn.setblocking(True)
            conn.settimeout(30)
            request, fds = _read_request(conn)
        except Exception as exc:  # noqa: BLE001 - a bad request costs that job its server, nothing else
            print(f"jobserver: request refused: {exc}", flush=True)
            conn.close()
            return
        changed = _changed(self.state)
        other = next((k for k in self.own if request.get(k) != self.own[k]), None)
        if changed or other:
            print(f"jobserver: a job runs in its own process: "
                  f"{'changed on disk: ' + changed if changed else 'another ' + other}", flush=True)
            for fd in fds:
                os.close(fd)
            try:
                conn.sendall(b"N" + _EXIT.pack(0))
            except OSError:
                pass
            conn.close()
            self.stale = bool(changed)  # the next job starts a server with the code on disk
            return
        sys.stdout.flush()
        sys.stderr.flush()
        gc.freeze()  # what the server loaded stays out of the child's collections (see serve)
        pid = os.fork()
        if pid == 0:
            gc.enable()
            self.sock.close()
            conn.settimeout(None)
            _run_child(conn, request, fds, self.program)
        self.served += 1
        for fd in fds:
            os.close(fd)
        conn.close()

    def close(self) -> None:
        if os.getpid() == self.me:
            self.sock.close()
            self.path.unlink(missing_ok=True)
            (self.folder / "pid").unlink(missing_ok=True)


def serve(folder: Path, run_pid: int, program: Program, prepare: Callable[[], object]) -> int:
    """Serve jobs from `folder`/socket until the run `run_pid` ends or the package changes on disk: each job runs
    `program(argv)` in a forked child; `prepare` is warm_steps' first import."""
    started = time.monotonic()
    # Python's advice for a process that forks without exec (the gc module's docs, gc.freeze): no collection in
    # the server while it imports (they make little garbage), and its objects frozen before each fork. A job's
    # collections then walk only what the job made: a render ends with IPython's full collection (the shell's
    # reset), 0.25 s over the server's ~300,000 objects, and no collection writes to the shared pages.
    gc.disable()
    server = Server(folder, run_pid, program)
    try:
        for name, optional in warm_steps(prepare):
            if server.stale or not _alive(run_pid):  # a short run is over before its server is warm: no more imports
                print(f"jobserver: warm-up stopped at {name}: "
                      f"{'the package changed' if server.stale else 'the run is over'}", flush=True)
                break
            problem = load(name, optional)
            if problem:
                print(f"jobserver: not preloaded: {problem}", flush=True)
            server.state = {**code_state(), **server.state}
            server.poll(0)
        else:
            print(f"jobserver: warm after {time.monotonic() - started:.1f} s: {len(sys.modules)} modules, "
                  f"{len(server.state)} of the package's files watched, {server.served} jobs served meanwhile",
                  flush=True)
        gc.freeze()  # the warm heap out of the server's own collections from now on, which run again: a server
        gc.enable()  # lives as long as its run (days for a paper run), and its accept loop may make cyclic garbage
        while not server.stale and _alive(run_pid):
            server.poll(POLL_S)
    finally:
        server.close()
        print(f"jobserver: stopped after {server.served} jobs, {time.monotonic() - started:.1f} s", flush=True)
    _reap()
    if not _alive(run_pid):  # the run is over: its folders go (a stale server's stay for the next one)
        for leftover in (folder / "lock", folder, folder.parent):
            try:
                leftover.unlink() if leftover.is_file() else leftover.rmdir()
            except OSError:
                pass
    return 0
