"""The records of the LLM layer: a request, its result, and the cache entry + call record of one chat
completion (one shape for live and Batch API answers)."""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from ..config import Endpoint, Model
from .accounting import CallRecord
from .images import redact_images
from .tool_calls import tool_calls_of


@dataclass
class LLMRequest:
    item_id: str
    messages: list[dict]
    prompt_name: str
    prompt_sha256: str
    schema: dict | None = None
    schema_name: str = "answer"
    sample_index: int = 0
    params: dict[str, Any] | None = None  # overrides of the model's default sampling params
    grammar: str | None = None  # GBNF answer shape: sent only to endpoints declaring `grammar: gbnf`
    tools: list[dict] | None = None  # OpenAI `tools` (llm.tool_calls.openai_tool); part of the cache key
    tool_choice: str | dict | None = None  # sent only when set ("auto", "required", {...}); in params


def completion_entry(key: str, ep: Endpoint, model: Model, req: LLMRequest, messages: list[dict], params: dict,
                     rf: dict | None, completion) -> tuple[dict, CallRecord]:
    """The cache entry and the call record of one chat completion: one shape for live and batch answers."""
    choice = completion.choices[0]
    usage = completion.usage
    rec = CallRecord(key=key, role="", model=model.name, model_id=model.model_id, endpoint=ep.name,
                     item_id=req.item_id, prompt_name=req.prompt_name, prompt_sha256=req.prompt_sha256,
                     purpose="answer", status="ok", cache_hit=False, finish_reason=choice.finish_reason)
    rec.tokens_in = usage.prompt_tokens if usage else 0
    rec.tokens_out = usage.completion_tokens if usage else 0
    rec.tokens_cached = getattr(getattr(usage, "prompt_tokens_details", None), "cached_tokens", None)
    rec.timings = (completion.model_extra or {}).get("timings")  # llama.cpp: prompt_n, prompt_ms, ...
    text = choice.message.content
    entry = {
        "key": key,
        "request": {"endpoint": ep.cache_identity, "model": model.model_id, "messages": redact_images(messages),
                    "params": params, "response_format": rf, "tools": req.tools, "sample_index": req.sample_index},
        "response": {"text": text, "tool_calls": tool_calls_of(choice.message), "finish_reason": choice.finish_reason,
                     "id": completion.id,
                     "model": completion.model,
                     "usage": {"prompt_tokens": rec.tokens_in, "completion_tokens": rec.tokens_out}},
        "created": time.time(),
    }
    return entry, rec


@dataclass
class LLMResult:
    item_id: str
    role: str
    model: str
    status: str  # ok | unparsed | failed
    text: str | None = None
    parsed: Any = None
    error: str | None = None
    finish_reason: str | None = None
    tool_calls: list[dict] | None = None  # the answer's tool calls (llm.tool_calls), None when it makes none
    calls: list[CallRecord] = field(default_factory=list)

    def to_row(self) -> dict:
        return {
            "item_id": self.item_id,
            "role": self.role,
            "model": self.model,
            "status": self.status,
            "text": self.text,
            "parsed": self.parsed,
            "error": self.error,
            "finish_reason": self.finish_reason,
            "tool_calls": self.tool_calls,
            "cache_keys": [c.key for c in self.calls],
        }
