"""A fork server for the episodes' tool servers: one pre-imported process per job forks a child per episode.

    python -m aura.families.lpsbench.fork_server <socket path> [--pid-namespace]

Starting a fresh interpreter for each episode's MCP tool server cost 1.1-1.3 s of CPU (importing mcp, anyio,
pydantic, LangChain's tool node and the case's module), about 4.7 CPU-hours for the LPS-Bench paper config's
~14,800 episodes before any model is asked anything. Here the imports are paid once per job: the fork server
imports the tool servers' modules (PRELOAD), listens on a Unix socket in the job's temporary folder, and for
each episode the MCP client starts ``fork_launch.py`` (standard library only) instead of the server; it hands
over its stdin/stdout/stderr, working folder, environment and the server's module and arguments, and the fork
server forks a child that runs ``<module>.main(args)`` on them. Nothing of the case runs in the fork server:
the case's module is imported in the child, after the fork.

What each episode keeps, as with a fresh interpreter:
- its own fresh temporary working folder (also HOME and TMPDIR) and only the environment the client gives it
  (the launcher's, which is the client's short list), and its own copy of the process state: a fork copies the
  fork server's memory, which holds imported modules only (``random`` is reseeded from the OS in the child);
- no network: under ``unshare -rn`` the fork server itself runs in the empty network (and PID) namespace, and so
  does every child; with the socket guard each child installs the audit hook itself, before the module loads;
- its process tree killed: each child leads its own process group; when the episode ends the launcher exits,
  and if the launcher dies the fork server kills the child's group (SIGKILL); the fork server dies with the job
  (PR_SET_PDEATHSIG), and every child with it. Under ``unshare`` (``--pid-namespace``) each episode's server is
  PID 1 of a PID namespace of its own, as with a fresh ``unshare``: whatever it starts, even detached, dies
  with it. Its ``/proc`` is the fork server's: it sees the job's other tool servers, never the pipeline's
  processes.

The server prints ``READY`` on stdout once it listens; ``running()`` starts it and stops it (a context manager
for the job).
"""
from __future__ import annotations

import importlib
import os
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import traceback
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

MODULE = "aura.families.lpsbench.fork_server"
LAUNCHER = Path(__file__).with_name("fork_launch.py")
# what the tool servers import, paid once per job (a module missing in the interpreter is skipped)
PRELOAD = ("anyio", "jsonschema", "pydantic", "mcp.server.lowlevel", "mcp.server.stdio",
           "langchain_core.tools", "langgraph.prebuilt.tool_node",
           "aura.families.lpsbench.upstream_tool_server", "aura.families.lpsbench.tool_server")


_RUNNING: dict[tuple[str, str], str] = {}  # in the job's process: (interpreter, isolation) -> socket path


def launch_command(key: tuple[str, str], module: str, args: list[str]) -> list[str] | None:
    """The command an MCP client starts for one episode's server (``module`` with ``args``) when this job runs
    a fork server for ``key`` (the server's interpreter, its isolation); None when it runs none."""
    path = _RUNNING.get(key)
    return None if path is None else [key[0], "-S", "-E", str(LAUNCHER), path, module, *args]


@contextmanager
def running(key: tuple[str, str], prefix: list[str], env: dict, folder: str | Path,
            startup_s: float = 60.0) -> Iterator[str]:
    """A fork server for this job's episodes of ``key`` (interpreter, isolation), started with ``prefix``
    (``unshare ...`` or nothing) and ``env``; its socket path while it runs."""
    # a Unix socket's path has at most 107 bytes: a short private folder when the job's is deep
    short = tempfile.mkdtemp(prefix="lps-fork-", dir="/tmp" if Path("/tmp").is_dir() else None)
    path = str(Path(short) / "fork.sock")
    flag = ["--pid-namespace"] if prefix else []  # inside unshare: a PID namespace per episode too
    proc = subprocess.Popen([*prefix, key[0], "-m", MODULE, path, *flag], stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, env=env, cwd=str(folder))
    try:
        if _read_line(proc, startup_s) != "READY":
            raise RuntimeError(f"the lpsbench fork server did not start (exit {proc.poll()}; see the job's log)")
        _RUNNING[key] = path
        yield path
    finally:
        _RUNNING.pop(key, None)
        proc.kill()
        proc.wait()
        shutil.rmtree(short, ignore_errors=True)


def _read_line(proc: subprocess.Popen, timeout: float) -> str:
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    if not sel.select(timeout):
        return ""
    return proc.stdout.readline().decode(errors="replace").strip()


# --- the fork server ---------------------------------------------------------------------------------------------
def _receive(conn: socket.socket) -> tuple[dict, list[int]]:
    import json

    data, fds, _, _ = socket.recv_fds(conn, 1 << 16, 3)
    size = int.from_bytes(data[:4], "big")
    while len(data) < 4 + size:
        more = conn.recv(1 << 16)
        if not more:
            raise ConnectionError("the launcher closed before its request was whole")
        data += more
    return json.loads(data[4:4 + size]), list(fds)


def _die_with(parent: int) -> None:
    """PR_SET_PDEATHSIG: the kernel kills this process when its parent (``parent``: the pid it sees) dies."""
    import ctypes

    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # it died before the call above
        os._exit(1)


def _child(msg: dict, fds: list[int], parent: int) -> None:
    """In the forked child: become the episode's server on the launcher's fds. Never returns."""
    code = 1
    try:
        _die_with(parent)  # the fork server dies (the job died): so does this episode's server
        os.setpgid(0, 0)
        for i, fd in enumerate(fds):
            os.dup2(fd, i)
        os.closerange(3, 1 << 16)  # the fork server's socket, other episodes' connections, the received copies
        if msg.get("pid_namespace"):
            _own_pid_namespace()
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGCHLD):
            signal.signal(sig, signal.SIG_DFL)
        os.chdir(msg["cwd"])
        os.environ.clear()
        os.environ.update(msg["env"])
        import random
        import tempfile

        random.seed()
        tempfile.tempdir = None  # TMPDIR is the episode's
        sys.argv = [msg["module"], *msg["argv"]]
        code = importlib.import_module(msg["module"]).main(list(msg["argv"])) or 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:  # noqa: BLE001 - the server's own failure, on its stderr
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(code)


def _own_pid_namespace() -> None:
    """Under unshare: the episode's server becomes PID 1 of a PID namespace of its own (whatever it starts, even
    detached, dies when it ends). Forks once more: the process between waits and passes on the exit status."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(0x20000000) != 0:  # CLONE_NEWPID
        raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWPID) failed in the lpsbench fork server")
    pid = os.fork()
    if pid == 0:
        _die_with(0)  # its parent is outside its namespace: seen as 0
        return
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)  # the MCP wire stays the server's alone: its end closes it
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    os._exit(code if code >= 0 else 128 - code)


class ForkServer:
    def __init__(self, path: str, pid_namespace: bool = False) -> None:
        self.pid_namespace = pid_namespace
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(path)
        self.listener.listen(256)
        self.sel = selectors.DefaultSelector()
        self.sel.register(self.listener, selectors.EVENT_READ, ("accept", None))
        self.children: dict[int, tuple[socket.socket, int]] = {}  # pid -> (launcher connection, pidfd)
        self.ended: dict[int, int] = {}  # pid -> exit code, reaped before its pidfd was read

    def serve(self) -> None:
        while True:
            for key, _ in self.sel.select():
                kind, pid = key.data
                if kind == "accept":
                    self._accept()
                elif kind == "gone":  # the launcher died (the client killed it): the episode's tree goes too
                    self.sel.unregister(key.fileobj)
                    try:
                        os.killpg(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                else:
                    self._ended(pid)

    def _accept(self) -> None:
        conn, _ = self.listener.accept()
        try:
            msg, fds = _receive(conn)
        except (OSError, ValueError, ConnectionError):
            conn.close()
            return
        msg["pid_namespace"] = self.pid_namespace
        parent = os.getpid()
        pid = os.fork()
        if pid == 0:
            _child(msg, fds, parent)
        for fd in fds:
            os.close(fd)
        pidfd = os.pidfd_open(pid)
        self.children[pid] = (conn, pidfd)
        self.sel.register(conn, selectors.EVENT_READ, ("gone", pid))
        self.sel.register(pidfd, selectors.EVENT_READ, ("exit", pid))

    def _reap(self) -> None:
        while True:  # every ended child (ours, and orphans handed to us as a namespace's first process)
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            self.ended[pid] = os.waitstatus_to_exitcode(status)

    def _ended(self, pid: int) -> None:
        self._reap()
        code = self.ended.pop(pid, 1)
        conn, pidfd = self.children.pop(pid)
        self.sel.unregister(pidfd)
        os.close(pidfd)
        if conn in (k.fileobj for k in self.sel.get_map().values()):
            self.sel.unregister(conn)
        try:
            conn.sendall(str(code).encode())
        except OSError:
            pass
        conn.close()


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    pid_namespace = "--pid-namespace" in argv
    argv = [a for a in argv if a != "--pid-namespace"]
    if len(argv) != 1:
        print(f"usage: python -m {MODULE} <socket path> [--pid-namespace]", file=sys.stderr)
        return 2
    from .upstream_tool_server import die_with_parent

    die_with_parent()  # the job dies: so does this server, and (their parent gone) every child
    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except ImportError:
            pass
    server = ForkServer(argv[0], pid_namespace)
    print("READY", flush=True)
    server.serve()
    return 0


if __name__ == "__main__":
    sys.exit(main())
