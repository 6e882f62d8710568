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


def usage_counts(usage) -> tuple[int, int, int | None]:
    """(prompt tokens, completion tokens billed as output, reasoning tokens or None) of a completion's usage.

    Reasoning tokens are ``usage.completion_tokens_details.reasoning_tokens`` (None when the server reports
    none: a model that does not reason, or a server that does not itemise them). They are billed as output and
    never shown. OpenAI (o-series, GPT-5) and DeepSeek count them inside ``completion_tokens``: taken as they
    are. A server that counts them beside it instead (``total_tokens`` = prompt + completion + reasoning, or a
    completion_tokens smaller than the reasoning tokens, as some OpenAI-compatible layers in front of Gemini
    report them) gets them added. The completion tokens returned are therefore always the billed output,
    reasoning included, counted once, and the cost is priced from them alone.
    """
    if not usage:
        return 0, 0, None
    tokens_in, tokens_out = usage.prompt_tokens or 0, usage.completion_tokens or 0
    reasoning = getattr(getattr(usage, "completion_tokens_details", None), "reasoning_tokens", None)
    total = getattr(usage, "total_tokens", None)
    if reasoning and (tokens_out < reasoning or total == tokens_in + tokens_out + reasoning):
        tokens_out += reasoning  # counted beside completion_tokens (it cannot hold them): billed output all the same
    return tokens_in, tokens_out, reasoning


def completion_entry(key: str, ep: Endpoint, model: Model, req: LLMRequest, messages: list[dict], params: dict,
                     rf: dict | None, completion) -> tuple[dict, CallRecord]:
    """The cache entry and the call record of one chat completion: one shape for live and batch answers.

    The entry's ``response.usage`` holds the record's prompt and completion tokens (billed output, reasoning
    included: usage_counts) and, only when the server reported them, ``reasoning_tokens``, so a cache hit
    reports them too; entries written before keep their shape, and no cache key depends on any of it.
    """
    choice = completion.choices[0]
    usage = completion.usage
    rec = CallRecord(key=key, role="", model=model.name, model_id=model.model_id, endpoint=ep.name,
                     item_id=req.item_id, prompt_name=req.prompt_name, prompt_sha256=req.prompt_sha256,
                     purpose="answer", status="ok", cache_hit=False, finish_reason=choice.finish_reason)
    rec.tokens_in, rec.tokens_out, rec.tokens_reasoning = usage_counts(usage)
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
                     "usage": {"prompt_tokens": rec.tokens_in, "completion_tokens": rec.tokens_out,
                               **({} if rec.tokens_reasoning is None else {"reasoning_tokens": rec.tokens_reasoning})}},
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
