"""Upstream LPS-Bench tool modules read as source: each listed tool's name, description and argument schema.

Upstream's per-case modules (``tools/<domain>_<RISK>_<n>.py``) define their tools as LangChain ``@tool``
functions with typed signatures and docstrings. This module turns them into ToolSpecs by parsing the text
with ``ast``: it never imports or executes the module, so third-party code (whose top level may do anything,
and which needs LangChain) never runs in the pipeline's process, and a broken module is a one-line
``problem`` rather than an exception. The schema follows what LangChain's tool-call schema would give for
the signature (str -> string, Optional[X] -> anyOf [X, null], Literal -> enum, a literal default as
``default``, parameters without a default ``required``); the module's full text goes along as ``source``,
the emulator's picture of how the tools behave.

Forms understood at module top level: ``@tool`` / ``@tool("other_name")`` / ``@tool(return_direct=True)``
(also as ``@langchain.tools.tool``), ``x = tool(func)`` / ``tool("name")(func)``,
``StructuredTool.from_function(func, name=..., description=...)``, and plain functions. A later binding of
a name wins, as it would on import.
"""
from __future__ import annotations

import ast
import json
import warnings
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import jsonschema

from aura.config import ConfigError

from .cases import LpsCase, ToolSpec
from .upstream_tools import module_path

INJECTED = ("InjectedToolArg", "InjectedToolCallId", "InjectedState", "InjectedStore", "RunnableConfig",
            "CallbackManager")
SCALARS = {"str": "string", "int": "integer", "float": "number", "bool": "boolean", "bytes": "string"}
ARRAYS = {"list", "List", "Sequence", "MutableSequence", "Iterable", "Collection", "set", "Set", "frozenset",
          "FrozenSet", "tuple", "Tuple"}
OBJECTS = {"dict", "Dict", "Mapping", "MutableMapping"}


@dataclass(frozen=True)
class ModuleTools:
    """What a module gives a case: its text and the listed tools' specs, or why it cannot serve the case."""

    path: str
    source: str            # the module's full text (the emulator is shown it as the tools' behaviour)
    specs: list[ToolSpec]  # one per requested name, in the requested order; empty when problem is set
    problem: str | None    # one line: "syntax error at line 12: invalid syntax", "no tool named foo, bar (...)"


def _tail(node: ast.expr) -> str | None:
    """`List` for ``List`` and ``typing.List``; None for anything else."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _args(node: ast.expr) -> list[ast.expr]:
    return list(node.elts) if isinstance(node, ast.Tuple) else [node]


def _any_of(schemas: list[dict]) -> dict:
    if any(s == {} for s in schemas):
        return {}
    return schemas[0] if len(schemas) == 1 else {"anyOf": schemas}


def annotation_schema(node: ast.expr | None) -> dict:
    """The JSON schema of one annotation ({} = any value)."""
    if node is None:
        return {}
    if isinstance(node, ast.Constant):
        if node.value is None:
            return {"type": "null"}
        if isinstance(node.value, str):  # a string annotation: "List[str]"
            try:
                return annotation_schema(ast.parse(node.value, mode="eval").body)
            except (SyntaxError, ValueError):
                return {}
        return {}
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):  # X | None
        return _any_of([annotation_schema(node.left), annotation_schema(node.right)])
    if isinstance(node, ast.Subscript) and _args(node.slice):
        head, args = _tail(node.value), _args(node.slice)
        if head == "Optional":
            return _any_of([annotation_schema(args[0]), {"type": "null"}])
        if head == "Union":
            return _any_of([annotation_schema(a) for a in args])
        if head == "Annotated":
            return annotation_schema(args[0])
        if head == "Literal":
            ok, values = _literal(ast.Tuple(elts=args, ctx=ast.Load()))
            if not ok:
                return {}
            types = {SCALARS.get(type(v).__name__) for v in values}
            return {"enum": values, **({"type": types.pop()} if len(types) == 1 and None not in types else {})}
        if head in ARRAYS:
            items = annotation_schema(args[0])  # Tuple[X, ...] too (approximated by X for Tuple[X, Y])
            return {"type": "array", **({"items": items} if items else {})}
        if head in OBJECTS:
            values = annotation_schema(args[1]) if len(args) == 2 else {}
            return {"type": "object", **({"additionalProperties": values} if values else {})}
        return {}
    if isinstance(node, ast.Subscript):  # Tuple[()]
        node = node.value
    head = _tail(node)
    if head in SCALARS:
        return {"type": SCALARS[head]}
    if head in ARRAYS:
        return {"type": "array"}
    if head in OBJECTS:
        return {"type": "object"}
    return {}  # Any, a class of the module, anything unknown


def _valid(schema: dict) -> dict:
    """`schema` if it is a valid draft 2020-12 schema, else {} (any value)."""
    return schema if _checks(json.dumps(schema, sort_keys=True)) else {}


@lru_cache(maxsize=4096)
def _checks(schema_json: str) -> bool:  # check_schema costs ~2 ms; the same few schemas recur thousands of times
    try:
        jsonschema.Draft202012Validator.check_schema(json.loads(schema_json))
    except jsonschema.SchemaError:
        return False
    return True


def _literal(node: ast.expr) -> tuple[bool, object]:
    """(True, value) for an expression that is a JSON-able literal (a tuple becomes a list), else (False, None)."""
    try:
        return True, json.loads(json.dumps(ast.literal_eval(node), allow_nan=False))
    except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
        return False, None


def parameters_schema(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> dict:
    """The object schema of a function's parameters (self, *args, **kwargs and injected ones left out)."""
    a = fn.args
    positional = [*a.posonlyargs, *a.args]
    defaults = [None] * (len(positional) - len(a.defaults)) + list(a.defaults)
    params = [*zip(positional, defaults), *zip(a.kwonlyargs, a.kw_defaults)]
    if params and params[0][0].arg in ("self", "cls"):
        params = params[1:]
    props, required = {}, []
    for arg, default in params:
        if arg.annotation is not None and any(m in ast.unparse(arg.annotation) for m in INJECTED):
            continue
        schema = dict(_valid(annotation_schema(arg.annotation)))
        if default is None:
            required.append(arg.arg)
        else:
            ok, value = _literal(default)
            if ok:
                schema["default"] = value
        props[arg.arg] = schema
    return {"type": "object", "properties": props, **({"required": required} if required else {})}


def _is_tool(node: ast.expr) -> bool:
    return _tail(node) == "tool"


def _str_kw(call: ast.Call, key: str) -> str | None:
    for kw in call.keywords:
        if kw.arg == key and isinstance(kw.value, ast.Constant) and isinstance(kw.value.value, str):
            return kw.value.value
    return None


def _tool_call(call: ast.Call) -> tuple[str | None, str | None, ast.expr | None]:
    """For ``tool(...)``: (name given, description given, the wrapped function's expression if any)."""
    name, func = None, None
    for arg in call.args:
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
            name = name or arg.value
        elif func is None:
            func = arg
    return name or _str_kw(call, "name_or_callable"), _str_kw(call, "description"), func


Binding = tuple[ast.FunctionDef | ast.AsyncFunctionDef, str | None]  # the function, a description given


def module_tools(tree: ast.Module) -> dict[str, Binding]:
    """Every tool (and plain function) bound at the module's top level, by tool name; later bindings win."""
    funcs: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
    tools: dict[str, Binding] = {}

    def wrapped(expr, name=None, description=None):
        if isinstance(expr, ast.Name) and expr.id in funcs:
            tools[name or expr.id] = funcs[expr.id], description

    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            funcs[node.name] = node
            name, description = node.name, None
            for deco in node.decorator_list:
                if isinstance(deco, ast.Call) and _is_tool(deco.func):
                    given, description, _ = _tool_call(deco)
                    name = given or name
            tools[name] = node, description
        elif isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(node.value, ast.Call):
            call = node.value
            if _is_tool(call.func):  # x = tool(func) / tool("name", func)
                name, description, func = _tool_call(call)
                wrapped(func, name, description)
            elif isinstance(call.func, ast.Call) and _is_tool(call.func.func) and call.args:  # tool("name")(func)
                name, description, _ = _tool_call(call.func)
                wrapped(call.args[0], name, description)
            elif _tail(call.func) == "from_function":  # StructuredTool.from_function(func, name=..., ...)
                func = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "func"), None)
                wrapped(func, _str_kw(call, "name"), _str_kw(call, "description"))
    return tools


def tool_spec(name: str, fn: ast.FunctionDef | ast.AsyncFunctionDef, description: str | None = None) -> ToolSpec:
    """The ToolSpec of one tool: its docstring (unless a description was given) and its parameters' schema."""
    doc = ast.get_docstring(fn, clean=True) or ""
    return ToolSpec(name=name, description=doc if description is None else description,
                    parameters=parameters_schema(fn))


def read_module_tools(path: str | Path, names: list[str]) -> ModuleTools:
    """The specs of the tools `names` of the module at `path`, read from its source (never imported)."""
    path = Path(path)
    try:
        source = path.read_bytes().decode("utf-8")
    except OSError as exc:
        return ModuleTools(str(path), "", [], f"cannot read the module: {exc.strerror or exc}")
    except UnicodeDecodeError as exc:
        return ModuleTools(str(path), "", [], f"not UTF-8 text (byte {exc.start})")
    try:
        with warnings.catch_warnings():  # e.g. invalid escape sequences: the module's business
            warnings.simplefilter("ignore")
            tree = ast.parse(source, filename=str(path))
    except SyntaxError as exc:
        return ModuleTools(str(path), source, [], f"syntax error at line {exc.lineno}: {exc.msg}")
    except (ValueError, RecursionError) as exc:  # null bytes; absurd nesting
        return ModuleTools(str(path), source, [], f"cannot parse the module: {exc}")
    tools = module_tools(tree)
    missing = [n for n in names if n not in tools]
    if missing:
        return ModuleTools(str(path), source, [], f"no tool named {', '.join(missing)} (the case's MCP.tools)")
    try:
        specs = [tool_spec(n, *tools[n]) for n in names]
    except ValueError as exc:  # pydantic's ValidationError: cannot happen for a name from MCP.tools
        return ModuleTools(str(path), source, [], f"bad tool spec: {' '.join(str(exc).split())}")
    return ModuleTools(str(path), source, specs, None)


def case_tools(root: str | Path, case: LpsCase) -> ModuleTools:
    """The case's tools from its module in the checkout at `root` (a missing module is a problem, not raised)."""
    try:
        path = module_path(root, case)
    except ConfigError:
        return ModuleTools(str(Path(root) / case.body.mcp.file), "", [],
                           f"no module {case.body.mcp.file} in the checkout")
    return read_module_tools(path, case.body.mcp.tools)
