"""The code checks of a generated case's parts and the JSON schemas of the three workers' answers
(generate.py's docstring lists the checks and their reasons)."""
from __future__ import annotations

import re

import jsonschema

from .cases import TOOL_NAME

PARAM_TYPES = ["string", "integer", "number", "boolean", "array", "object"]
PARAM_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
LETTER = re.compile(r"[^\W\d_]")
IDENT = r"[a-z][a-z0-9]*(?:_[a-z0-9]+)+"
TOOL_MENTION = re.compile(rf"\b(?:call|calls|calling|invoke|invokes|invoking)\s+(?:the\s+)?`?({IDENT})\b`?(?!\.\w|[(/])"
                          rf"|`?\b({IDENT})\b`?\s+(?:tool|tools|api|API)\b")
# A line that only introduces what follows: a Markdown heading, or text ending in a colon ("The user's
# instructions:"). An instruction made of such lines alone says nothing to the agent.
HEADING = re.compile(r"^\s*(?:#+\s.*|[^\n]*:\s*)$")
# Length caps of the answers' strings. The instruction has none: llama.cpp refuses a grammar whose string
# repeats more than about 1000 times (checked: maxLength 1000 compiles, 1200 does not), and upstream's
# instructions run to ~2,600 characters; max_tokens bounds it.
LIMITS = {"scenario": 300, "tool_description": 200, "behaviour": 400, "param_description": 120, "criterion": 800,
          "params": 6}


def mentioned_tools(text: str) -> list[str]:
    """Tool names the text names (module docstring: unknown_tool), in order."""
    return [m.group(1) or m.group(2) for m in TOOL_MENTION.finditer(text)]


def unknown_tool_problem(text: str, what: str, names: list[str]) -> str | None:
    unknown = [t for t in mentioned_tools(text) if t not in names]
    if unknown:
        return (f"unknown_tool: the {what} names {unknown[0]!r}, which is not one of the case's tools "
                f"({', '.join(names)})")
    return None


def empty(value: str) -> bool:
    return not LETTER.search(value or "")


def only_headings(text: str) -> bool:
    """Whether every line with words is a heading or ends in a colon (HEADING): nothing is asked."""
    return all(HEADING.match(line) for line in (text or "").splitlines() if not empty(line))


def design_problem(answer: dict) -> str | None:
    for field in ("scenario", "instruction"):
        if empty(answer[field]):
            return f"empty_field: the {field} has no words"
    if only_headings(answer["instruction"]):
        return (f"empty_field: the instruction {one_line(answer['instruction'])[:60]!r} is only a heading; "
                "write the user's message itself")
    return None


def one_line(text: str) -> str:
    return " ".join(str(text).split())


def parameters_schema(params: list[dict]) -> dict:
    """The tool's JSON schema (type object) from its parameter list; "array" is a list of strings."""
    props = {}
    for p in params:
        props[p["name"]] = {"type": p["type"], "description": " ".join(p["description"].split())}
        if p["type"] == "array":
            props[p["name"]]["items"] = {"type": "string"}
    return {"type": "object", "properties": props, "required": [p["name"] for p in params if p["required"]],
            "additionalProperties": False}


def tools_problem(tools: list[dict], instruction: str, min_tools: int, max_tools: int) -> str | None:
    """The tool developer's answer checked (module docstring), in order."""
    if not min_tools <= len(tools) <= max_tools:
        return f"tool_count: {len(tools)} tools; give {min_tools} to {max_tools}"
    for k, t in enumerate(tools, 1):
        if not TOOL_NAME.match(t["name"]):
            return f"tool_name: tool {k} name {t['name']!r} is not 1-64 letters, digits, '_' or '-'"
    names = [t["name"] for t in tools]
    if dup := sorted({n for n in names if names.count(n) > 1}):
        return f"duplicate_tool: tool name {dup[0]!r} is used {names.count(dup[0])} times; names must be unique"
    for t in tools:
        for field in ("description", "behaviour"):
            if empty(t[field]):
                return f"empty_field: tool {t['name']!r} {field} has no words"
        pnames = [p["name"] for p in t["parameters"]]
        for p in t["parameters"]:
            if not PARAM_NAME.match(p["name"]):
                return f"parameters: tool {t['name']!r} parameter {p['name']!r} is not an identifier"
            if pnames.count(p["name"]) > 1:
                return f"parameters: tool {t['name']!r} lists parameter {p['name']!r} twice"
            if empty(p["description"]):
                return f"empty_field: tool {t['name']!r} parameter {p['name']!r} description has no words"
        try:
            jsonschema.Draft202012Validator.check_schema(parameters_schema(t["parameters"]))
        except jsonschema.SchemaError as exc:
            return f"parameters: tool {t['name']!r} parameters are not a valid JSON schema: {exc.message}"
    return unknown_tool_problem(instruction, "instruction", names)


def criterion_problem(criterion: str, names: list[str]) -> str | None:
    if empty(criterion):
        return "empty_field: the criterion has no words"
    return unknown_tool_problem(criterion, "criterion", names)


# step schemas ----------------------------------------------------------------------------------------
def _str(limit: int | None) -> dict:
    return {"type": "string", "minLength": 1, **({"maxLength": limit} if limit else {})}


DESIGN_SCHEMA = {"type": "object", "additionalProperties": False, "required": ["scenario", "instruction"],
                 "properties": {"scenario": _str(LIMITS["scenario"]), "instruction": _str(None)}}
CRITERION_SCHEMA = {"type": "object", "additionalProperties": False, "required": ["criterion"],
                    "properties": {"criterion": _str(LIMITS["criterion"])}}


def tools_schema(min_tools: int, max_tools: int) -> dict:
    param = {"type": "object", "additionalProperties": False, "required": ["name", "type", "description", "required"],
             "properties": {"name": _str(64), "type": {"enum": PARAM_TYPES},
                            "description": _str(LIMITS["param_description"]), "required": {"type": "boolean"}}}
    tool = {"type": "object", "additionalProperties": False,
            "required": ["name", "description", "parameters", "behaviour"],
            "properties": {"name": _str(64), "description": _str(LIMITS["tool_description"]),
                           "parameters": {"type": "array", "maxItems": LIMITS["params"], "items": param},
                           "behaviour": _str(LIMITS["behaviour"])}}
    return {"type": "object", "additionalProperties": False, "required": ["tools"],
            "properties": {"tools": {"type": "array", "minItems": min_tools, "maxItems": max_tools, "items": tool}}}


