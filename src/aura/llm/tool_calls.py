"""OpenAI tool calling as plain data: the `tools` a request offers, the `tool_calls` an answer makes.

A request (`LLMRequest.tools`, `LLMRequest.tool_choice`) offers functions in the OpenAI format
(`openai_tool`); `tools` enter the cache key, `tool_choice` travels in the params (so it does too).
An answer's tool calls come back as plain dicts, ``{"id", "type": "function", "function": {"name",
"arguments"}}`` with `arguments` the JSON text the model wrote, cached with the answer, so a replay
from the cache gives the same calls with the same ids.
"""
from __future__ import annotations

import json
from typing import Any


def openai_tool(name: str, description: str | None, parameters: dict | None) -> dict:
    """One function in the OpenAI `tools` format; a missing schema becomes an object with no fixed fields."""
    return {"type": "function",
            "function": {"name": name, "description": description or "",
                         "parameters": parameters or {"type": "object", "properties": {}}}}


def tool_calls_of(message: Any) -> list[dict] | None:
    """The tool calls of an `openai` chat completion message as plain dicts (None when it makes none)."""
    calls = getattr(message, "tool_calls", None)
    if not calls:
        return None
    return [call.model_dump(mode="json", exclude_none=True) for call in calls]


def parse_arguments(call: dict) -> tuple[dict | None, str | None]:
    """(arguments, None) for a call whose arguments are a JSON object, else (None, the reason).

    Raw control characters (a newline, a tab) inside JSON strings are accepted (``strict=False``): models
    and grammar-constrained servers write them unescaped, and the value is unambiguous."""
    text = (call.get("function") or {}).get("arguments")
    if text is None or text == "":
        return {}, None
    try:
        value = json.loads(text, strict=False)
    except json.JSONDecodeError as exc:
        return None, f"arguments are not valid JSON ({exc.msg} at character {exc.pos})"
    if not isinstance(value, dict):
        return None, f"arguments must be a JSON object, got {type(value).__name__}"
    return value, None


def assistant_message(content: str | None, tool_calls: list[dict] | None) -> dict:
    """The assistant turn to append to a conversation after an answer (with its tool calls, if any)."""
    msg: dict = {"role": "assistant", "content": content}
    if tool_calls:
        msg["tool_calls"] = tool_calls
    return msg


def tool_message(call_id: str, content: str) -> dict:
    """The `tool` turn carrying one call's result back to the model."""
    return {"role": "tool", "tool_call_id": call_id, "content": content}
