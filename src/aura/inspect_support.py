"""What the families' Inspect tasks share: chat messages from rendered prompts, one structured judge call
parsed the way the LLM layer parses it, and the prompt record every task puts in its metadata.

Only the families' Inspect task modules import this (Inspect is never imported by a workflow job).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from inspect_ai.model import (ChatMessage, ChatMessageAssistant, ChatMessageSystem, ChatMessageUser, ContentImage,
                              ContentText, GenerateConfig, Model, ResponseSchema)
from inspect_ai.util import JSONSchema

from .llm.structured import parse_structured
from .prompts import get_prompt, prompt_file

ROLES = {"system": ChatMessageSystem, "user": ChatMessageUser, "assistant": ChatMessageAssistant}


def _content(content):
    """A message's content: text, or OpenAI-style parts (text, image_url with a data URL) as Inspect's."""
    if isinstance(content, str):
        return content
    return [ContentText(text=part["text"]) if part["type"] == "text" else ContentImage(image=part["image_url"]["url"])
            for part in content]


def to_chat(messages: list[dict]) -> list[ChatMessage]:
    """Rendered prompt messages ({role, content} dicts, as the LLM layer sends them) as Inspect chat messages."""
    return [ROLES[m["role"]](content=_content(m["content"])) for m in messages]


def prompt_record(*names: str) -> dict[str, dict[str, str]]:
    """name -> {ref, file, sha256} of each prompt in the version its family's manifest selects: what a task
    puts in its metadata, as a workflow output's provenance does."""
    out = {}
    for name in names:
        p = get_prompt(name)
        out[name] = {"ref": p.ref, "file": prompt_file(name), "sha256": p.sha256}
    return out


@dataclass(frozen=True)
class Verdict:
    status: str  # ok | unparsed | failed (as the LLM layer's results)
    value: Any  # the parsed JSON object (None unless ok)
    raw: str | None
    error: str | None


async def structured_call(model: Model, messages: list[dict], schema: dict, name: str,
                          config: GenerateConfig | None = None) -> Verdict:
    """One call asking for JSON under `schema` (sent as the response schema), parsed and validated by the LLM
    layer's parser. A call that raises is `failed`, an answer not valid under the schema `unparsed`."""
    rs = ResponseSchema(name=name, json_schema=JSONSchema.model_validate(schema), strict=True)
    cfg = (config or GenerateConfig()).merge(GenerateConfig(response_schema=rs))
    try:
        output = await model.generate(to_chat(messages), config=cfg)
    except Exception as exc:  # noqa: BLE001 - a failed call is a missing vote, as in the workflow
        return Verdict("failed", None, None, f"{type(exc).__name__}: {exc}")
    text = output.completion
    value, reason = parse_structured(text, schema)
    return Verdict("ok" if reason is None else "unparsed", value, text, reason)
