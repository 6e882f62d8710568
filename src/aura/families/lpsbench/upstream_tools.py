"""Tool back-end (b): upstream LPS-Bench's own per-case mock-tool modules, from a user's checkout.

Config ``lpsbench.tools: {backend: upstream, upstream_dir: <checkout>}``. Each episode gets its own server
process (upstream_tool_server.py) over the case's module (``MCP.file``: ``<checkout>/<file>``, else
``<checkout>/tools/<file>``, as upstream's runner looks), and this module never imports that code:

- a fresh temporary working directory (also HOME and TMPDIR), removed when the episode ends, killed or not;
- an environment of PATH, the locale and PYTHONPATH only (no API keys reach third-party code) and no
  bytecode written into the checkout;
- no network: ``unshare -rn`` (a user namespace with an empty network namespace: only a down loopback)
  when it works here, else ``--socket-guard`` (an audit hook refusing sockets and new processes, installed
  before the module is imported). ``lpsbench.tools.network`` forces one; the record says which ran.
  The unshare mode also gives the server its own PID namespace and /proc (``--pid --fork --kill-child
  --mount-proc``): a process the module starts, even in a new session, dies with the server, and the
  pipeline's processes (and their environments, API keys included) are not visible from it. The guard is
  a fence against a mock tool reaching the network by accident, not a sandbox for hostile code: ctypes or
  ``_posixsubprocess`` get around an audit hook, and /proc shows the parent's environment. Neither mode
  isolates the file system (the module can write wherever this user can): run a checkout you do not trust
  in a container;
- time limits per call and per episode (``AgentSettings.tool_call_timeout_s`` / ``tool_time_limit_s``,
  enforced by the agent loop; past one the episode stops with ``tool_failed`` and the reason, and closing
  the session kills the server: stdin closed, 2 s, then SIGTERM and SIGKILL to its process tree).

With the ask_user extension (beyond the paper), mitigated benign episodes get the ``ask_user`` tool: it is
answered in this process by the simulated user (tool_server.EmulatedEnvironment; the tool server has no
network), the other calls go to the module. The modules' LangChain imports are installed with the project and
loaded only by the server subprocess.
"""
from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
from functools import lru_cache
from pathlib import Path

import anyio
import mcp_types as types
from mcp import ClientSession, StdioServerParameters, stdio_client

from aura.config import REPO_ROOT, ConfigError

from .cases import LpsCase
from .fork_server import launch_command, running

SERVER = "aura.families.lpsbench.upstream_tool_server"
# unshare -rn, plus a PID namespace whose processes all die with the server (and with unshare itself, killed
# by the MCP client) and its own /proc (the pipeline's processes are not visible)
UNSHARE = ["unshare", "--user", "--map-root-user", "--net", "--pid", "--fork", "--kill-child", "--mount-proc"]
KEPT_ENV = ("PATH", "LANG", "LC_ALL", "LC_CTYPE")
STARTUP_S = 60.0  # how long the server may take to start (importing mcp and the module)


class UpstreamServerError(RuntimeError):
    """The upstream tool server could not serve the case (its own one-line reason)."""


def module_path(root: str | Path, case: LpsCase) -> Path:
    """The case's tool module in the checkout, or ConfigError naming the case and where it looked."""
    root = Path(root)
    name = case.body.mcp.file
    tried = [root / name, root / "tools" / Path(name).name]
    for p in tried:
        if p.is_file():
            return p.resolve()
    raise ConfigError(f"lpsbench.tools.upstream_dir: no tool module for case {case.case_id} "
                      f"(looked for {', '.join(map(str, tried))})")


@lru_cache(maxsize=None)
def unshare_works() -> bool:
    """Whether this machine lets an unprivileged process enter a new user + network namespace."""
    try:
        return subprocess.run([*UNSHARE, "true"], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def isolation(mode: str) -> str:
    """``unshare -rn`` or ``socket_guard`` for the configured ``network`` mode (auto, unshare, guard)."""
    if mode == "guard" or (mode == "auto" and not unshare_works()):
        return "socket_guard"
    if not unshare_works():
        raise ConfigError("lpsbench.tools.network: unshare -rn does not work on this machine (user namespaces "
                          "off?); use network: guard or auto")
    return "unshare -rn"


def server_params(spec, work: str | Path) -> tuple[StdioServerParameters, dict]:
    """How to start the case's upstream tool server in `work`, and what the record says about it."""
    root = Path(spec.tools.upstream_dir).resolve()
    module = module_path(root, spec.case)
    network = isolation(spec.tools.network)
    python = spec.tools.python or sys.executable
    args = ["--module", str(module), "--root", str(root), "--tools", ",".join(spec.case.body.mcp.tools)]
    args += [] if network == "unshare -rn" else ["--socket-guard"]
    # the job's fork server (already inside the namespace) when it runs one, else a fresh interpreter
    cmd = launch_command((python, network), SERVER, args) or \
        [*(UNSHARE if network == "unshare -rn" else []), python, "-m", SERVER, *args]
    env = {k: os.environ[k] for k in KEPT_ENV if k in os.environ}
    env.update(HOME=str(work), TMPDIR=str(work), PYTHONDONTWRITEBYTECODE="1", PYTHONPATH=str(REPO_ROOT / "src"))
    # the record holds no path of this clone or run (a rebuild elsewhere writes the same bytes): the module
    # relative to the checkout, identified by its sha256; the interpreter as configured (null: the pipeline's)
    shown = module.relative_to(root).as_posix() if module.is_relative_to(root) else str(module)
    info = {"backend": "upstream", "module": shown,
            "module_sha256": hashlib.sha256(module.read_bytes()).hexdigest(),
            "python": spec.tools.python, "network": network, "call_timeout_s": spec.settings.tool_call_timeout_s,
            "episode_timeout_s": spec.settings.tool_time_limit_s}
    return StdioServerParameters(command=cmd[0], args=cmd[1:], env=env, cwd=str(work)), info


def fork_servers(specs, folder: str | Path, stack) -> None:
    """One fork server (fork_server.py) for this job's upstream episodes, per interpreter and isolation, entered
    on ``stack`` (it stops with the job)."""
    for python, network in sorted({(s.tools.python or sys.executable, isolation(s.tools.network))
                                   for s in specs if s.tools.backend == "upstream"}):
        env = {k: os.environ[k] for k in KEPT_ENV if k in os.environ}
        env.update(HOME=str(folder), TMPDIR=str(folder), PYTHONDONTWRITEBYTECODE="1", PYTHONPATH=str(REPO_ROOT / "src"))
        stack.enter_context(running((python, network), UNSHARE if network == "unshare -rn" else [], env, folder))


class AskUserSession:
    """An MCP session plus the mitigation's ask_user tool, answered here by the simulated user."""

    def __init__(self, session: ClientSession, spec, client):
        from .tool_server import ASK_USER, EmulatedEnvironment

        self.session, self.ask = session, ASK_USER
        self.env = EmulatedEnvironment(spec, client)

    async def list_tools(self) -> types.ListToolsResult:
        listed = await self.session.list_tools()
        ask = types.Tool(name=self.ask.name, description=self.ask.description, input_schema=self.ask.parameters)
        return listed.model_copy(update={"tools": [*listed.tools, ask]})

    async def call_tool(self, name: str, arguments: dict | None = None, **kw) -> types.CallToolResult:
        if name == self.ask.name:
            return await self.env.call(name, arguments)
        return await self.session.call_tool(name, arguments, **kw)


def _reason(errlog) -> str | None:
    errlog.seek(0)
    lines = [ln.strip() for ln in errlog.read().splitlines() if ln.strip().startswith("error:")]
    return lines[-1][len("error:"):].strip() if lines else None


async def run_upstream_case(spec, client, run_episode):
    """Run one episode against the case's upstream module in its own isolated server process;
    `run_episode(session, client, spec)` is the agent loop (agent.run_episode, passed in by its caller)."""
    with tempfile.TemporaryDirectory(prefix="lpsbench-tools-") as work, \
            tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace") as errlog:
        params, info = server_params(spec, work)
        episode = None
        try:
            async with stdio_client(params, errlog=errlog) as (read, write):
                async with ClientSession(read, write) as session:
                    try:  # a module whose import hangs must not hang the job
                        with anyio.fail_after(STARTUP_S):
                            await session.initialize()
                    except TimeoutError:
                        print(f"error: the server did not start within {STARTUP_S:g} s", file=errlog, flush=True)
                        raise
                    tools = AskUserSession(session, spec, client) if spec.user_model else session
                    episode = await run_episode(tools, client, spec)
        except Exception as exc:  # noqa: BLE001 - the server's own reason, when it gave one, names the problem
            if episode is not None:  # the episode ran (its server may have died mid-way: the record so far)
                episode.environment = info
                return episode
            reason = _reason(errlog)
            if reason is None:
                raise
            raise UpstreamServerError(f"upstream tool server for {spec.case.case_id}: {reason}") from exc
    episode.environment = info
    return episode
