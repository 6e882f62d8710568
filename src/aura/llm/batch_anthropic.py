"""Anthropic's Message Batches API as a batch adapter (aura.llm.batch.BatchAPI), for ``batch: anthropic``.

Anthropic's OpenAI compatibility layer (the endpoint's ``base_url``, which the live calls use) has no
/v1/batches; its native API does: ``POST /v1/messages/batches`` with ``{requests: [{custom_id, params}]}``,
``GET /v1/messages/batches/{id}`` (``processing_status`` in_progress -> canceling -> ended, with
``request_counts``), and the results JSONL at the batch's ``results_url``, one line per request:
``{custom_id, result: {type: succeeded | errored | canceled | expired, message | error}}``. The calls go
through the official ``anthropic`` SDK at ``batch_base_url`` (default https://api.anthropic.com) with the
endpoint's ``api_key_env``. State files, lock, resume, polling and cache entries are aura.llm.batch's.

Each pending call becomes one request, custom_id = its cache key (64 hex characters: Anthropic's limit):
the OpenAI messages become ``system`` (the system and developer messages, joined by a blank line) and
``messages`` (text and image parts as Anthropic blocks); ``max_tokens`` (required by Anthropic) is the
model's or request's max_tokens; temperature, top_p, stop (as stop_sequences) and an endpoint's top_k
(extra_sampling) pass through. Anything else (a response_format, seed, penalties, min_p, ...) stops the
job with one line before anything is sent: the batch never quietly sends another request than the
cache key stands for.

A succeeded result is cached as the chat completion a live call through the OpenAI layer returns: text =
its text blocks joined, finish_reason from stop_reason (end_turn, stop_sequence -> stop; max_tokens ->
length), usage input_tokens (+ cache reads and writes, none unless asked) -> prompt_tokens,
output_tokens -> completion_tokens. An errored result is a failed line (llm.batch.on_failure); an
expired or canceled one is left for a new batch (on_expired), as on the OpenAI path.

Anthropic's batches carry no metadata, so a batch whose create answer was lost (or whose job was killed
before writing its id) is found by elimination: created within minutes of its state file, holding exactly
its number of requests, named by no other state file, and (once ended) answering exactly its custom_ids.
Two such batches stop the job with one line rather than guess; none means none was made.
"""
from __future__ import annotations

import json
import re
import time
from typing import TYPE_CHECKING, Any, Callable, Iterator

import anthropic
from openai.types.chat import ChatCompletion

from ..errors import ConfigError
from .batch_api import BatchView
from .errors import RETRYABLE_STATUS, StageFailed

if TYPE_CHECKING:
    from ..config import Endpoint, Model
    from .batch_api import _Pending

DEFAULT_BASE_URL = "https://api.anthropic.com"
CUSTOM_ID = re.compile(r"[a-zA-Z0-9_-]{1,64}")
DATA_URL = re.compile(r"data:(?P<mime>[\w.+/-]+);base64,(?P<data>.*)", re.DOTALL)
# stop_reason -> the finish_reason a chat completion gives (the OpenAI layer's mapping)
FINISH = {"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length", "tool_use": "tool_calls",
          "pause_turn": "stop", "refusal": "content_filter", "model_context_window_exceeded": "length"}
PASSED = ("temperature", "top_p")  # params sent as they are
CREATE_SKEW_S = 600.0  # clock skew allowed between this host and Anthropic when finding a batch by its time


# --- request translation ----------------------------------------------------------------------------
def message_params(model: "Model", messages: list[dict], params: dict, rf: dict | None = None,
                   tools: list | None = None) -> dict:
    """The Messages API ``params`` of one OpenAI-style chat call; ConfigError (one line) for what the
    Message Batches API cannot take."""
    where = f"model '{model.name}' (endpoint '{model.endpoint}', batch: anthropic)"
    if rf is not None:
        raise ConfigError(f"{where}: Anthropic's Message Batches API takes no response_format "
                          f"({rf.get('type')}); set the endpoint's structured_output: none (the schema then "
                          "goes in the prompt)")
    if tools:
        raise ConfigError(f"{where}: calls with tools are never batched")
    rest = dict(params)
    extra = dict(rest.pop("extra_body", None) or {})
    max_tokens = rest.pop("max_tokens", None)
    alt = rest.pop("max_completion_tokens", None)
    max_tokens = alt if max_tokens is None else max_tokens
    if max_tokens is None:
        raise ConfigError(f"{where}: Anthropic requires max_tokens; set it in the model's params "
                          "(e.g. max_tokens: 1024)")
    system, turns = _messages(messages, where)
    out: dict[str, Any] = {"model": model.model_id, "max_tokens": max_tokens}
    if system is not None:
        out["system"] = system
    out["messages"] = turns
    for name in PASSED:
        if name in rest:
            out[name] = rest.pop(name)
    stop = rest.pop("stop", None)
    if stop is not None:
        out["stop_sequences"] = [stop] if isinstance(stop, str) else list(stop)
    if "top_k" in extra:
        out["top_k"] = extra.pop("top_k")
    refused = sorted(rest) + sorted(f"extra_body.{k}" for k in extra)
    if refused:
        raise ConfigError(f"{where}: params {', '.join(refused)} not taken by Anthropic's Message Batches API; "
                          "remove them from the model's params or set the endpoint's batch: false")
    return out


def _messages(messages: list[dict], where: str) -> tuple[str | None, list[dict]]:
    system: list[str] = []
    turns: list[dict] = []
    for msg in messages:
        role, content = msg.get("role"), msg.get("content")
        if role in ("system", "developer"):  # one top-level system prompt, as the OpenAI layer hoists them
            system.append(content if isinstance(content, str) else
                          "".join(_block(p, where)["text"] for p in content or [] if p.get("type") == "text"))
        elif role in ("user", "assistant"):
            turns.append({"role": role, "content": content if isinstance(content, str) else
                          [_block(part, where) for part in content or []]})
        else:
            raise ConfigError(f"{where}: a '{role}' message cannot go in a Message Batches request")
    return ("\n\n".join(system) if system else None), turns


def _block(part: dict, where: str) -> dict:
    kind = part.get("type")
    if kind == "text":
        return {"type": "text", "text": part.get("text", "")}
    if kind == "image_url":
        url = (part.get("image_url") or {}).get("url", "")
        data = DATA_URL.fullmatch(url)
        if data:
            return {"type": "image", "source": {"type": "base64", "media_type": data["mime"], "data": data["data"]}}
        return {"type": "image", "source": {"type": "url", "url": url}}
    raise ConfigError(f"{where}: a message part of type '{kind}' cannot go in a Message Batches request")


# --- result translation -----------------------------------------------------------------------------
def chat_completion(message: Any) -> ChatCompletion:
    """A succeeded result's Message as the chat completion a live call through the OpenAI layer returns."""
    texts = [block.text for block in message.content if getattr(block, "type", None) == "text"]
    usage = message.usage
    cached = getattr(usage, "cache_read_input_tokens", None) or 0
    prompt = usage.input_tokens + cached + (getattr(usage, "cache_creation_input_tokens", None) or 0)
    return ChatCompletion.model_validate({
        "id": message.id, "object": "chat.completion", "created": int(time.time()), "model": message.model,
        "choices": [{"index": 0, "logprobs": None, "finish_reason": FINISH.get(message.stop_reason or "", "stop"),
                     "message": {"role": "assistant", "content": "".join(texts) if texts else None}}],
        "usage": {"prompt_tokens": prompt, "completion_tokens": usage.output_tokens,
                  "total_tokens": prompt + usage.output_tokens,
                  **({"prompt_tokens_details": {"cached_tokens": cached}} if cached else {})},
    })


# --- the adapter ------------------------------------------------------------------------------------
class AnthropicBatchAPI:
    kind, label = "anthropic", "Message Batches API"
    errors = (anthropic.AnthropicError,)

    def __init__(self, ep: "Endpoint", key: str | None, options: dict, claimed: Callable[[], set[str]]):
        self.ep, self._claimed = ep, claimed
        # the SDK's own retries (with backoff) cover retrieve, list and results; create is tried once
        self.client = anthropic.Anthropic(base_url=ep.batch_base_url or DEFAULT_BASE_URL,
                                          api_key=key or "not-needed", max_retries=ep.max_tries - 1,
                                          timeout=ep.timeout_s)

    def request(self, key: str, p: "_Pending", model: "Model") -> dict:
        if not CUSTOM_ID.fullmatch(key):
            raise ConfigError(f"cache key {key!r} is not a valid custom_id (^[a-zA-Z0-9_-]{{1,64}}$)")
        return {"custom_id": key, "params": message_params(model, p.messages, p.params, p.rf, p.req.tools)}

    def upload(self, name: str, requests: list[dict]) -> dict:
        return {}  # the requests go in the create's own body

    def create(self, state: dict, requests: list[dict]) -> dict:
        batch = self.client.with_options(max_retries=0).messages.batches.create(requests=requests)
        return {"batch_id": batch.id}

    def find(self, state: dict) -> dict | None:
        """The batch this state's job made, by elimination (no metadata; see the module doc)."""
        since = state.get("created") or 0.0
        tries = self.ep.max_tries * (self.ep.timeout_s + self.ep.backoff_max_s)  # the creates' longest span
        first, last = since - CREATE_SKEW_S, since + CREATE_SKEW_S + tries
        keys, claimed, found = set(state["keys"]), self._claimed(), []
        for batch in self.client.messages.batches.list(limit=100):  # newest first; iterating fetches more pages
            created = batch.created_at.timestamp()
            if created < first:
                break
            c = batch.request_counts
            if (created > last or batch.id in claimed
                    or c.processing + c.succeeded + c.errored + c.canceled + c.expired != len(keys)):
                continue
            if batch.processing_status == "ended" and batch.results_url:  # ended: its custom_ids tell
                if {row.custom_id for row in self.client.messages.batches.results(batch.id)} != keys:
                    continue
            found.append(batch.id)
        if len(found) > 1:
            raise StageFailed(
                f"endpoint '{self.ep.name}': batches {', '.join(found)} each could be the one of batch state "
                f"{state['name']} (its create answer was lost, or its job was killed before writing the id; "
                "Anthropic batches carry no metadata to tell): write the right id as its batch_id with status "
                "submitted, or delete the state file to submit again")
        return {"batch_id": found[0]} if found else None

    def retrieve(self, batch_id: str) -> BatchView:
        batch = self.client.messages.batches.retrieve(batch_id)
        done = batch.processing_status == "ended"
        c = batch.request_counts
        final = ("expired" if c.expired else "cancelled" if c.canceled else "completed") if done else None
        return BatchView(batch.id, batch.processing_status, done, final, None, batch)

    def results(self, batch: BatchView) -> Iterator[tuple[str, Any]]:
        for row in self.client.messages.batches.results(batch.id):
            result = row.result
            if result.type == "succeeded":
                yield row.custom_id, chat_completion(result.message)
            elif result.type == "errored":
                err = (result.error.model_dump() if result.error is not None else {}).get("error") or {}
                yield row.custom_id, (f"batch {batch.id}: {err.get('type') or 'error'}: "
                                      f"{err.get('message') or 'no message'}")
            else:  # canceled, expired: not run
                yield row.custom_id, None

    def retryable(self, exc: BaseException) -> bool:
        if isinstance(exc, (anthropic.APITimeoutError, anthropic.APIConnectionError)):
            return True
        if isinstance(exc, anthropic.APIStatusError):
            return exc.status_code in RETRYABLE_STATUS or exc.status_code >= 500
        return isinstance(exc, (anthropic.APIResponseValidationError, json.JSONDecodeError))

    def listing(self) -> None:
        self.client.messages.batches.list(limit=1)

    def describe(self, exc: BaseException) -> str:
        if isinstance(exc, anthropic.APIStatusError):
            body = exc.body if isinstance(exc.body, dict) else {}
            err = body.get("error") if isinstance(body.get("error"), dict) else {}
            msg = " ".join(str(err.get("message") or exc.message).split())[:300]
            return f"HTTP {exc.status_code}: {type(exc).__name__}: {msg}"
        return f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}"

    def close(self) -> None:
        self.client.close()
