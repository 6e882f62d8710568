"""The tool developer's mock-tool module (``lpsbench.generate.toolkit: module``, the paper's form): the answer's
schema, and the checks a module passes before a case may use it.

The tool developer answers ``{"tools": [names], "module": "<python source>"}``: the case's toolkit as one
Python module in upstream's form (LangChain ``@tool`` over typed, documented functions; module-level state
where the risk needs it). Checked in this order, the first failure naming the reason:

tool_count / tool_name / duplicate_tool   the listed names, as for tool specs (generate_checks).
module_syntax    the source does not parse (line and message).
module_tools     the module's ``@tool`` functions are not exactly the listed names (one missing or extra).
unknown_tool     the instruction names a tool the list lacks.
module_call      in the isolated tool server (upstream_tool_server.py, started as for an episode: temporary
                 folder, no network), the module does not import, does not list a tool, or a tool called
                 with arguments of its declared types (sample_arguments) is refused or raises.

The probe runs every tool once in a throw-away server, so module state it changes is gone when the case runs.
"""
from __future__ import annotations

import ast
import tempfile
from pathlib import Path
from types import SimpleNamespace

import anyio

from .cases import TOOL_NAME, LpsCase
from .generate_checks import unknown_tool_problem
from .module_source import _is_tool, _tool_call, read_module_tools

PROBE_CALL_S = 30.0  # one probe call; a mock that sleeps to mimic latency fits
SAMPLE = {"string": "example", "integer": 1, "number": 1.0, "boolean": True, "array": [], "object": {}}


def module_schema(min_tools: int, max_tools: int) -> dict:
    return {"type": "object", "additionalProperties": False, "required": ["tools", "module"],
            "properties": {"tools": {"type": "array", "minItems": min_tools, "maxItems": max_tools,
                                     "items": {"type": "string", "minLength": 1, "maxLength": 64}},
                           "module": {"type": "string", "minLength": 1}}}


def decorated_tools(tree: ast.Module) -> list[str]:
    """The tool names of the module's top-level ``@tool`` functions (``@tool("name")`` renames one)."""
    names = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for deco in node.decorator_list:
                if _is_tool(deco):
                    names.append(node.name)
                elif isinstance(deco, ast.Call) and _is_tool(deco.func):
                    names.append(_tool_call(deco)[0] or node.name)
    return names


def sample_value(schema: dict):
    """A value of the type a JSON schema declares (its default, its first enum value, else SAMPLE)."""
    if "default" in schema:
        return schema["default"]
    if schema.get("enum"):
        return schema["enum"][0]
    for option in schema.get("anyOf") or []:
        if option.get("type") != "null":
            return sample_value(option)
    return SAMPLE.get(schema.get("type"), "example")


def sample_arguments(schema: dict) -> dict:
    """Arguments for every parameter the tool declares, each of its declared type."""
    return {name: sample_value(prop) for name, prop in (schema.get("properties") or {}).items()}


def static_problem(answer: dict, instruction: str, min_tools: int, max_tools: int) -> str | None:
    """The checks that need no process: the names, the source's syntax, its tools against the list."""
    names = answer["tools"]
    if not min_tools <= len(names) <= max_tools:
        return f"tool_count: {len(names)} tools; give {min_tools} to {max_tools}"
    for k, name in enumerate(names, 1):
        if not TOOL_NAME.match(name):
            return f"tool_name: tool {k} name {name!r} is not 1-64 letters, digits, '_' or '-'"
    if dup := sorted({n for n in names if names.count(n) > 1}):
        return f"duplicate_tool: tool name {dup[0]!r} is listed {names.count(dup[0])} times; names must be unique"
    try:
        tree = ast.parse(answer["module"])
    except SyntaxError as exc:
        return f"module_syntax: line {exc.lineno}: {exc.msg}"
    defined = decorated_tools(tree)
    if missing := [n for n in names if n not in defined]:
        return f"module_tools: the module has no @tool {missing[0]!r} (listed tools must each be a @tool function)"
    if extra := [n for n in defined if n not in names]:
        return f"module_tools: the module's @tool {extra[0]!r} is not listed (the module exposes exactly the list)"
    return unknown_tool_problem(instruction, "instruction", names)


def _case(file: str, names: list[str]) -> LpsCase:
    """A stand-in case for the probe's server: its module file and tool list are all the server reads."""
    return SimpleNamespace(case_id="probe", body=SimpleNamespace(mcp=SimpleNamespace(file=file, tools=names)))


async def _probe(params, names: list[str], errlog) -> str | None:
    from mcp import ClientSession, stdio_client

    from .upstream_tools import STARTUP_S, _reason

    try:
        async with stdio_client(params, errlog=errlog) as (read, write):
            async with ClientSession(read, write) as session:
                with anyio.fail_after(STARTUP_S):
                    await session.initialize()
                listed = {t.name: t for t in (await session.list_tools()).tools}
                for name in names:
                    args = sample_arguments(listed[name].input_schema or {})
                    with anyio.fail_after(PROBE_CALL_S):
                        result = await session.call_tool(name, args)
                    status = (result.structured_content or {}).get("status")
                    if status != "ok":
                        text = " ".join(" ".join(c.text for c in result.content if hasattr(c, "text")).split())
                        return f"module_call: tool {name!r} called with {args} was {status}: {text[:300]}"
    except TimeoutError:
        return f"module_call: the server or a call did not answer within {PROBE_CALL_S:g} s"
    except Exception as exc:  # noqa: BLE001 - the server's own reason (import failed, ...) names the problem
        return f"module_call: {_reason(errlog) or f'{type(exc).__name__}: {exc}'}"
    return None


def probe(source: str, file: str, names: list[str], tools_cfg: dict) -> str | None:
    """Serve the module in the isolated tool server and call every tool once; None, or the first problem."""
    from .upstream_tools import server_params

    with tempfile.TemporaryDirectory(prefix="lpsbench-probe-") as root, \
            tempfile.TemporaryDirectory(prefix="lpsbench-tools-") as work, \
            tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace") as errlog:
        (Path(root) / "tools").mkdir()
        (Path(root) / "tools" / file).write_text(source, encoding="utf-8")
        spec = SimpleNamespace(case=_case(file, names), settings=SimpleNamespace(tool_call_timeout_s=PROBE_CALL_S,
                                                                                tool_time_limit_s=None),
                               tools=SimpleNamespace(upstream_dir=root, network=tools_cfg.get("network", "auto"),
                                                     python=tools_cfg.get("python")))
        params, _ = server_params(spec, work)
        return anyio.run(_probe, params, names, errlog)


def module_specs(source: str, file: str, names: list[str]) -> list[dict]:
    """The listed tools as the agent will see them (read from the source, never imported): name, description,
    parameters."""
    with tempfile.TemporaryDirectory(prefix="lpsbench-module-") as folder:
        path = Path(folder) / file
        path.write_text(source, encoding="utf-8")
        got = read_module_tools(path, names)
    return [{"name": s.name, "description": " ".join(s.description.split()), "parameters": s.parameters}
            for s in got.specs]
