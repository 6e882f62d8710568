"""Structured output: adapt a JSON schema to what an endpoint speaks, then parse and validate."""
from __future__ import annotations

import json
import re
from typing import Any

import jsonschema

FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL)


def response_format_for(style: str, schema: dict | None, name: str) -> dict | None:
    """The `response_format` field to send, or None (schema then goes into the prompt)."""
    if schema is None:
        return None
    if style == "json_schema":
        return {"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": True}}
    if style == "json_object_schema":  # llama.cpp server: JSON mode constrained by a schema grammar
        return {"type": "json_object", "schema": schema}
    if style == "json_object":
        return {"type": "json_object"}
    if style in ("none", "gbnf_schema"):  # gbnf_schema: the schema travels as a grammar (client.prepare)
        return None
    raise ValueError(f"unknown structured_output style {style!r}")


def needs_schema_in_prompt(style: str) -> bool:
    return style in ("json_object", "none")


def _candidates(text: str):
    yield text
    for m in FENCE.finditer(text):
        yield m.group(1)
    start = text.find("{")
    while start != -1:  # first balanced {...} (string-aware)
        depth, in_str, esc = 0, False, False
        for i in range(start, len(text)):
            ch = text[i]
            if in_str:
                esc = (ch == "\\") and not esc
                if ch == '"' and not esc:
                    in_str = False
                continue
            if ch == '"':
                in_str = True
            elif ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
                if depth == 0:
                    yield text[start : i + 1]
                    break
        start = text.find("{", start + 1)


def parse_structured(text: str | None, schema: dict) -> tuple[Any | None, str | None]:
    """Return (value, None) for the first JSON candidate valid under schema, else (None, reason)."""
    if not text:
        return None, "empty response"
    reason = "no JSON object found"
    for cand in _candidates(text.strip()):
        try:
            value = json.loads(cand)
        except json.JSONDecodeError as exc:
            reason = f"invalid JSON: {exc.msg}"
            continue
        err = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(schema).iter_errors(value))
        if err is None:
            return value, None
        reason = f"schema violation at /{'/'.join(map(str, err.absolute_path))}: {err.message}"
    return None, reason


def cut_reason(text: str | None, finish_reason: str | None, schema: dict | None) -> str | None:
    """Why a structured answer is cut: the output cap stopped it (finish_reason "length") before a whole
    answer valid under `schema`. None for an answer that is not cut, that parses all the same, or that has
    no schema (plain text: the stage reads it)."""
    if finish_reason != "length" or schema is None:
        return None
    _, reason = parse_structured(text, schema)
    if reason is None:
        return None
    return f"answer cut at the output cap (finish_reason length; raise max_tokens?): {reason}"
