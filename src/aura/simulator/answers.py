"""What the simulated server answers with when a rule names no fixed text: a minimal value of a request's JSON
schema (``schema_default``) and a request's message text (``message_text``: the text parts of every message,
the text a rule's ``contains`` matches) and the schema a prompt carries where the endpoint takes none
(``prompt_schema``); and ``BATCH_LINE``, the batch line a responder is answering."""
from __future__ import annotations

import contextvars
import json
from typing import Any

# The custom_id of the batch line a responder is answering (None for a live call): a batch line's own identity,
# which tells apart requests whose bodies are equal on purpose (a repeated sample of one prompt is another cache
# key, hence another custom_id); set by both batch simulators around each line's answer.
BATCH_LINE: contextvars.ContextVar[str | None] = contextvars.ContextVar("BATCH_LINE", default=None)
SCHEMA_MARK = "valid under this JSON schema:"  # the LLM layer's json_instruction ends so, then the schema


def _resolve_ref(ref: str, root: dict) -> dict:
    if not ref.startswith("#/"):
        return {}
    node: Any = root
    for part in ref[2:].split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        if not isinstance(node, dict) or part not in node:
            return {}
        node = node[part]
    return node if isinstance(node, dict) else {}


def schema_default(schema: Any, root: Any = None, _depth: int = 0) -> Any:
    """Build a minimal value that conforms to a (simple) JSON schema.

    For objects every required property is filled in (all properties when the
    schema lists no ``required``): the first ``enum`` value, else ``"x"`` for
    strings, ``0`` for integers/numbers, ``False`` for booleans, ``[]`` for
    arrays (or ``minItems`` default items), and nested objects recursively.
    Local ``$ref`` (``#/$defs/...``), ``const``, ``anyOf``/``oneOf``/``allOf``
    and type lists are understood.
    """
    if root is None:
        root = schema
    if not isinstance(schema, dict) or _depth > 32:
        return {}
    if "$ref" in schema:
        return schema_default(_resolve_ref(schema["$ref"], root), root, _depth + 1)
    if "const" in schema:
        return schema["const"]
    enum = schema.get("enum")
    if isinstance(enum, list) and enum:
        return enum[0]
    for key in ("anyOf", "oneOf"):
        options = schema.get(key)
        if isinstance(options, list) and options:
            # prefer a non-null option
            for opt in options:
                if not (isinstance(opt, dict) and opt.get("type") == "null"):
                    return schema_default(opt, root, _depth + 1)
            return schema_default(options[0], root, _depth + 1)
    if isinstance(schema.get("allOf"), list) and schema["allOf"]:
        merged: dict = {}
        for part in schema["allOf"]:
            if isinstance(part, dict) and "$ref" in part:
                part = _resolve_ref(part["$ref"], root)
            if isinstance(part, dict):
                for k, v in part.items():
                    if k == "properties" and isinstance(v, dict):
                        merged.setdefault("properties", {}).update(v)
                    elif k == "required" and isinstance(v, list):
                        merged.setdefault("required", []).extend(v)
                    else:
                        merged.setdefault(k, v)
        rest = {k: v for k, v in schema.items() if k != "allOf"}
        merged.update({k: v for k, v in rest.items() if k not in merged})
        return schema_default(merged, root, _depth + 1)

    typ = schema.get("type")
    if isinstance(typ, list):
        non_null = [t for t in typ if t != "null"]
        typ = non_null[0] if non_null else (typ[0] if typ else None)
    if typ is None:
        if "properties" in schema:
            typ = "object"
        elif "items" in schema:
            typ = "array"

    if typ == "string":
        return "x"
    if typ in ("integer", "number"):
        minimum = schema.get("minimum", schema.get("exclusiveMinimum"))
        if isinstance(minimum, (int, float)) and not isinstance(minimum, bool) and minimum > 0:
            value = minimum if "minimum" in schema else minimum + 1
            return int(value) if typ == "integer" else value
        return 0
    if typ == "boolean":
        return False
    if typ == "null":
        return None
    if typ == "array":
        n = schema.get("minItems") or 0
        if isinstance(n, int) and n > 0:
            item = schema_default(schema.get("items", {}), root, _depth + 1)
            return [item for _ in range(n)]
        return []
    # object (or unknown)
    props = schema.get("properties")
    if not isinstance(props, dict):
        return {}
    required = schema.get("required")
    names = required if isinstance(required, list) else list(props)
    out: dict = {}
    for name in names:
        sub = props.get(name, {})
        out[name] = schema_default(sub, root, _depth + 1)
    return out


def message_text(messages: Any) -> str:
    parts: list[str] = []
    if not isinstance(messages, list):
        return ""
    for msg in messages:
        if not isinstance(msg, dict):
            continue
        content = msg.get("content")
        if isinstance(content, str):
            parts.append(content)
        elif isinstance(content, list):
            for piece in content:
                if isinstance(piece, dict) and isinstance(piece.get("text"), str):
                    parts.append(piece["text"])
                elif isinstance(piece, str):
                    parts.append(piece)
    return "\n".join(parts)


def prompt_schema(text: str) -> Any:
    """The JSON schema a prompt carries after the layer's json_instruction, or {}."""
    at = text.rfind(SCHEMA_MARK)
    if at < 0:
        return {}
    try:
        return json.JSONDecoder().raw_decode(text[at + len(SCHEMA_MARK):].lstrip())[0]
    except ValueError:
        return {}
