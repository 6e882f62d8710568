"""An MCP tool server (stdio) over one of upstream LPS-Bench's per-case mock-tool modules.

    python -m aura.families.lpsbench.upstream_tool_server --module <file.py> --root <checkout> \
        --tools <name,name,...> [--socket-guard]

It runs only as a subprocess (launched by upstream_tools.py, in a temporary working directory, under
``unshare -rn`` or with ``--socket-guard``); the pipeline's own process never imports third-party tool
code. Upstream's modules (``tools/<domain>_<RISK>_<n>.py`` of github.com/tychenn/LPS-Bench) define one
module-level object per tool the case lists in ``MCP.tools``: a LangChain tool (``@tool`` over a typed
function with a docstring; it has ``name``, ``description``, an args schema and ``invoke``). A plain typed
function is taken too (its signature gives the schema, its docstring the description). The module is
loaded under a fresh name, with the checkout on ``sys.path`` (upstream's modules import ``tools.<helper>``).

The kernel kills the server when its parent dies (``PR_SET_PDEATHSIG``): a killed job leaves none behind.
``--socket-guard`` (used when ``unshare`` cannot give the process an empty network namespace) installs an
audit hook before the module is imported: creating a socket, resolving a name, and starting a process raise
``PermissionError``. The hook cannot be removed (PEP 578), so the module cannot undo it.

A call is answered as LangChain v1's `create_agent` (its ToolNode with the default ``handle_tool_errors``, read in
the installed langgraph-prebuilt) answers it: an unknown tool and arguments that fail the tool's pydantic schema
are tool messages in ToolNode's own words (status ``rejected``); any other exception the tool raises is not
handled there, it ends the agent's run: the reply has status ``raised`` and the agent loop stops the episode
(``tool_raised``). Calls run in worker threads, so the calls of one step that the agent sends together run at
the same time, as ToolNode's parallel tasks do. MCP runs on private copies of fds 0 and 1: a tool's print()
goes to stderr.
A reply names the server's working folder (a fresh temporary folder, also HOME and TMPDIR) as ``/home/user``
and the checkout as ``/lpsbench``: what a tool returns (``os.path.abspath``, a path in an error) reaches the
agent's next requests, and a run's temporary name or a clone's path there would make them miss the cache.
Time limits are the client's: it abandons a call past its limit, and closing the session kills the process.
"""
from __future__ import annotations

import argparse
import ctypes
import importlib.util
import inspect
import io
import json
import os
import signal
import sys
import uuid
from pathlib import Path
from typing import Any, Callable

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from pydantic import BaseModel, ValidationError, create_model

BLOCKED_EVENTS = {  # PEP 578 audit events: network access and new processes
    "socket.__new__", "socket.connect", "socket.bind", "socket.getaddrinfo", "socket.gethostbyname",
    "socket.gethostbyaddr", "socket.sendto", "socket.sendmsg", "subprocess.Popen", "os.system", "os.exec",
    "os.posix_spawn", "os.spawn", "os.fork", "os.forkpty", "pty.spawn",
}


class LoadError(Exception):
    """The module or one of its tools cannot be served (one line)."""


def die_with_parent() -> None:
    """Linux: the kernel kills this server when the process that started it dies (PR_SET_PDEATHSIG), so a killed
    job leaves no server behind, even one stuck in a tool call that never returns."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: the client's kill escalation is the only limit
        return
    if os.getppid() == 1:  # the parent died before the call above
        os._exit(1)


def install_socket_guard() -> None:
    """Refuse network access and new processes from here on (an audit hook; it stays for the process)."""
    def hook(event: str, args: tuple) -> None:
        if event in BLOCKED_EVENTS:
            raise PermissionError(f"network access and new processes are blocked in this tool server ({event})")

    sys.addaudithook(hook)


class ServedTool:
    """One tool of the module: its MCP listing and how to run a call."""

    def __init__(self, name: str, obj: Any):
        self.name = name
        if hasattr(obj, "invoke") and (hasattr(obj, "args_schema") or hasattr(obj, "tool_call_schema")):
            self.description = str(getattr(obj, "description", "") or "")
            self.schema = _langchain_schema(obj)
            self.run: Callable[[dict], Any] = lambda arguments: _tool_message_content(obj, name, arguments)
        elif inspect.isfunction(obj):
            self.description = inspect.getdoc(obj) or ""
            model = _signature_model(name, obj)
            self.schema = model.model_json_schema()
            self.run = lambda arguments: obj(**dict(model.model_validate(arguments)))
        else:
            raise LoadError(f"'{name}' is a {type(obj).__name__}, not a tool (a LangChain tool or a function)")
        self.schema.setdefault("type", "object")
        self.schema.setdefault("properties", {})

    def listing(self) -> types.Tool:
        return types.Tool(name=self.name, description=self.description, input_schema=self.schema)


def _tool_message_content(obj: Any, name: str, arguments: dict) -> Any:
    """What ToolNode puts in the ToolMessage: the tool invoked with a tool call, its message's content."""
    out = obj.invoke({"name": name, "args": arguments, "id": "call", "type": "tool_call"})
    return getattr(out, "content", out)


def _langchain_schema(obj: Any) -> dict:
    """A LangChain tool's JSON schema (its tool-call schema: the arguments the model gives)."""
    for attr in ("tool_call_schema", "args_schema"):
        schema = getattr(obj, attr, None)
        if isinstance(schema, dict):
            return dict(schema)
        if isinstance(schema, type) and issubclass(schema, BaseModel):
            return schema.model_json_schema()
    return {"type": "object", "properties": dict(getattr(obj, "args", {}) or {})}


def _signature_model(name: str, fn: Callable) -> type[BaseModel]:
    fields = {}
    for p in inspect.signature(fn).parameters.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        annotation = Any if p.annotation is inspect.Parameter.empty else p.annotation
        fields[p.name] = (annotation, ... if p.default is inspect.Parameter.empty else p.default)
    return create_model(f"{name}_arguments", **fields)


def load_tools(module_path: Path, root: Path, names: list[str]) -> dict[str, ServedTool]:
    """Import the module under a fresh name (the checkout on sys.path) and take the named tools."""
    if str(root) not in sys.path:
        sys.path.append(str(root))
    dynamic = f"_lpsbench_upstream_{module_path.stem}_{uuid.uuid4().hex}"
    spec = importlib.util.spec_from_file_location(dynamic, module_path)
    if spec is None or spec.loader is None:
        raise LoadError(f"{module_path}: not an importable Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[dynamic] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # noqa: BLE001 - third-party code: any failure is reported in one line
        raise LoadError(f"{module_path}: import failed: {type(exc).__name__}: {exc}") from None
    missing = [n for n in names if not hasattr(module, n)]
    if missing:
        raise LoadError(f"{module_path}: no tool named {', '.join(missing)} (the case's MCP.tools)")
    return {n: ServedTool(n, getattr(module, n)) for n in names}


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(value)


WORK_STAND_IN, ROOT_STAND_IN = "/home/user", "/lpsbench"


def stand_ins(work: str | Path, root: str | Path) -> list[tuple[str, str]]:
    """(path, stand-in) for the working folder and the checkout, each as given and resolved, longest first."""
    pairs = {str(p): stand for folder, stand in ((work, WORK_STAND_IN), (root, ROOT_STAND_IN))
             for p in (Path(folder).absolute(), Path(folder).resolve()) if p != Path(p.anchor)}
    return sorted(pairs.items(), key=lambda kv: -len(kv[0]))


def _reply(text: str, status: str, paths: list[tuple[str, str]] = ()) -> types.CallToolResult:
    for path, stand in paths:  # a run's temporary folder or a clone's path never reaches the agent
        text = text.replace(path, stand)
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=status != "ok",
                                structured_content={"status": status})


def call(tools: dict[str, ServedTool], name: str, arguments: dict | None,
         paths: list[tuple[str, str]] = ()) -> types.CallToolResult:
    """One call's reply, as LangChain's ToolNode (default error handling) gives it; `paths` (stand_ins) are
    replaced in what the tool returns or raises."""
    from langgraph.prebuilt.tool_node import INVALID_TOOL_NAME_ERROR_TEMPLATE, ToolInvocationError

    arguments = arguments or {}
    tool = tools.get(name)
    if tool is None:
        return _reply(INVALID_TOOL_NAME_ERROR_TEMPLATE.format(requested_tool=name, available_tools=", ".join(tools)),
                      "rejected")
    try:
        return _reply(_text(tool.run(arguments)), "ok", paths)
    except ValidationError as exc:  # ToolNode: a ToolInvocationError, its message goes back to the model
        return _reply(ToolInvocationError(name, exc, arguments, exc.errors()).message, "rejected", paths)
    except Exception as exc:  # noqa: BLE001 - ToolNode re-raises it: the agent's run ends there
        return _reply(f"Error: {type(exc).__name__}: {exc}", "raised", paths)


def _wire() -> tuple:
    """The MCP streams on a private copy of fds 0 and 1; fd 1 and sys.stdout then point at stderr and fd 0 at
    the null device, so a tool's print() or input() never touches the wire."""
    wire_in, wire_out = os.dup(0), os.dup(1)
    os.dup2(2, 1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    sys.stdout = sys.stderr
    return (anyio.wrap_file(io.TextIOWrapper(os.fdopen(wire_in, "rb"), encoding="utf-8", errors="replace")),
            anyio.wrap_file(io.TextIOWrapper(os.fdopen(wire_out, "wb"), encoding="utf-8", write_through=True)))


async def serve(args: argparse.Namespace) -> int:
    die_with_parent()
    wire = _wire()  # before any tool code runs (an import may print)
    if args.socket_guard:
        install_socket_guard()  # after the event loop made its own socketpair, before any tool code
    try:
        tools = load_tools(Path(args.module), Path(args.root), [n for n in args.tools.split(",") if n])
    except LoadError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    import langgraph.prebuilt.tool_node  # noqa: F401 - now, not in the first call's time (upstream's tools load it too)

    paths = stand_ins(os.getcwd(), args.root)  # the launcher starts the server in its working folder
    async with stdio_server(*wire) as (read, write):
        async def list_tools(ctx, params) -> types.ListToolsResult:
            return types.ListToolsResult(tools=[t.listing() for t in tools.values()])

        async def call_tool(ctx, params: types.CallToolRequestParams) -> types.CallToolResult:
            # a worker thread each: the calls of one step run together (the client's limit abandons a hang)
            return await anyio.to_thread.run_sync(call, tools, params.name, params.arguments, paths)

        server = Server("lpsbench-upstream", on_list_tools=list_tools, on_call_tool=call_tool)
        await server.run(read, write, server.create_initialization_options())
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m aura.families.lpsbench.upstream_tool_server")
    parser.add_argument("--module", required=True, help="the case's tool module (.py)")
    parser.add_argument("--root", required=True, help="the LPS-Bench checkout (put on sys.path)")
    parser.add_argument("--tools", required=True, help="the case's MCP.tools, comma-separated")
    parser.add_argument("--socket-guard", action="store_true", help="block sockets and processes (audit hook)")
    args = parser.parse_args(argv)
    return anyio.run(serve, args)


if __name__ == "__main__":
    from aura.quick_exit import skip_final_collections

    skip_final_collections()
    sys.exit(main())
