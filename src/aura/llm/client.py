"""LLMClient: every model call of the pipeline goes through here.

Per call: build the request from the role's model config, look it up in the content-addressed
cache (a hit makes no network call), otherwise send it with the official ``openai`` client under
the endpoint's concurrency limit, retrying 429/5xx/timeouts with backoff (Retry-After honoured)
up to ``max_tries``; parse and validate structured answers, re-asking up to ``repair_tries``
times; record tokens, latency, cost and cache hits. Every answer is cached the moment it arrives,
except a structured answer the output cap cut (finish_reason "length", no whole JSON): that one is
a retryable outcome within ``max_tries`` (its tokens are paid and recorded), and an item whose every
try is cut fails (listed, counted, asked again on a rerun), so a cut answer never stands as final.

A transient failure that outlasts ``max_tries`` fails its item (a result with the reason). Two
things stop the whole job instead (the remaining calls are cancelled, nothing is written): a
non-retryable API error (`FatalEndpointError`: bad key, unknown model, bad parameter) and more
failed items than the job's ceiling (`TooManyFailures`, config ``llm``).
"""
from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import json
import math
import random
import time
from collections import Counter
from typing import Any, Sequence

import openai

from ..config import Config, Endpoint, Model
from ..io import StorageFull
from ..prompts import load_prompt, shared_prompt_dir
from .accounting import Accounting, CallRecord
from .batch import BatchRunner
from .cache import Cache, cache_key, image_cache_key
from .errors import (CutAnswer, EmptyChoices, FatalEndpointError, TooManyFailures, backoff_s, describe, endpoint_key,
                     is_item_level, is_retryable, retry_after_s)
from .images import ImageRequest, ImageResult, NoVision, has_images, redact_images
from .llama_engine import resolve as resolve_engine, schema_grammar
from .local_server import LocalServer, server_registry
from .preflight_gate import gate_message
from . import providers
from .structured import cut_reason, needs_schema_in_prompt, parse_structured, response_format_for
from .types import LLMRequest, LLMResult, completion_entry, usage_counts  # noqa: F401 - re-exported

NO_KEY = "not-needed"  # placeholder the openai client requires when an endpoint takes no key


def _prompt_text(req: LLMRequest) -> str:
    return "\0".join(f"{m['role']}\0{m.get('content')}" for m in redact_images(req.messages))


def _extra_sampling(ep: Endpoint, model_name: str, params: dict) -> dict:
    """Move the non-OpenAI sampling params (top_k, min_p) out of `params` into an extra_body dict.

    Only for endpoints whose `extra_sampling` lists them (llama.cpp takes them by default); for any
    other endpoint such a param is an error before any call, never sent and never silently dropped.
    """
    extra = {}
    for name in ("top_k", "min_p"):
        if name in params:
            if name not in ep.sampling_extras:
                raise FatalEndpointError(f"model '{model_name}': sampling param {name} is not taken by endpoint "
                                         f"'{ep.name}' (its extra_sampling: {list(ep.sampling_extras)}); not sent")
            extra[name] = params.pop(name)
    return extra


class _GiveUp(Exception):
    def __init__(self, reason: str, attempts: int):
        super().__init__(reason)
        self.reason, self.attempts = reason, attempts


class _EndpointRuntime:
    """The openai client and the concurrency gate of one endpoint within one job."""

    def __init__(self, ep: Endpoint, base_url: str, server_token: str | None = None, server_slots: int | None = None):
        self.ep = ep
        self.base_url = base_url
        # a local server's per-job token (api_key_env does not apply), else the endpoint's key
        key = server_token if ep.kind == "local" else endpoint_key(ep)
        self.client = openai.AsyncOpenAI(
            base_url=base_url,
            api_key=key or NO_KEY,
            max_retries=0,  # retries are ours: bounded, recorded, Retry-After aware
            timeout=ep.timeout_s,
            # The client's own HTTP pool: a hand-made httpx pool measured 4x slower at 64 connections.
        )
        # a local server answers `slots` requests at once: more in flight would only queue there
        self.sem = asyncio.Semaphore(min(ep.max_concurrency, server_slots or ep.max_concurrency))


class LLMClient:
    """Use as a context manager: local servers start when first needed and stop on exit."""

    def __init__(self, config: Config, cache: Cache | None = None, accounting: Accounting | None = None, *,
                 sleep=None, clock=None, rng: random.Random | None = None):
        """`sleep` (async, seconds), `clock` (seconds) and `rng` (backoff jitter) are injectable for tests."""
        self.config = config
        self.cache = cache or Cache(config.paths["cache"])
        self.acc = accounting or Accounting()
        self._sleep = sleep or asyncio.sleep
        self._clock = clock or time.perf_counter
        self._rng = rng or random.Random()
        limits = config.raw.get("llm") or {}
        self.max_failed_share = float(limits.get("max_failed_share", 0.05))
        self.max_failed_items = int(limits.get("max_failed_items", 1))
        self._servers: list[LocalServer] = []
        self._base_urls: dict[str, str] = {}
        self._tokens: dict[str, str] = {}  # per-job bearer token of each local server
        self._slots: dict[str, int] = {}  # requests each local server answers at once
        self._engines: dict[str, str] = {}  # the engine whose grammar form each gbnf_schema endpoint reads
        self._runtimes: dict[str, _EndpointRuntime] = {}
        self._count_items = True
        self._stopped = False  # set when the job stops (fatal error, ceiling): no further request
        self._outcome_of: dict[tuple, str] = {}  # (item_id, prompt, sample index) -> counted outcome
        self._inflight: dict[str, asyncio.Future] = {}  # cache key -> the answer of the call sending it now
        # llm.batch: first calls of some roles go through the Batch API into the cache (aura.llm.batch)
        self.batch = BatchRunner(self, limits["batch"]) if (limits.get("batch") or {}).get("roles") else None
        self._batch_failed: dict[str, str] = {}  # cache key -> why the batch failed it (on_failure: failed)
        self._batch_answered: set[str] = set()  # keys a batch answered in this job: their tokens are counted once
        self._json_instruction = load_prompt(shared_prompt_dir() / "json_instruction.v1.md")
        self._json_repair = load_prompt(shared_prompt_dir() / "json_repair.v1.md")
        # Prompts the layer itself may add to a conversation (their hashes go into provenance).
        self.layer_prompts = [self._json_instruction, self._json_repair,
                              load_prompt(shared_prompt_dir() / "rule_repair.v1.md")]

    # lifecycle ----------------------------------------------------------------------------
    def __enter__(self) -> "LLMClient":
        return self

    def __exit__(self, *exc) -> None:
        for server in self._servers:
            server.stop()
        self._servers.clear()
        self.acc.cache_repaired += len(self.cache.repaired)
        self.cache.repaired.clear()  # counted once, whichever client shares this cache
        self.acc.close()

    # public API ---------------------------------------------------------------------------
    def run(self, role: str, model_name: str, requests: Sequence[LLMRequest], desc: str | None = None,
            reasks: bool = False) -> list[LLMResult]:
        """Send many requests concurrently (bounded per endpoint); results in request order.

        `reasks=True` marks a second round for items already counted (a rule-breaking answer asked
        again): its calls, tokens and cost are accounted, but the items are not counted twice.
        """
        return asyncio.run(self.arun(role, model_name, requests, desc, reasks))

    async def arun(self, role: str, model_name: str, requests: Sequence[LLMRequest],
                   desc: str | None = None, reasks: bool = False) -> list[LLMResult]:
        self._refuse_images_without_vision(model_name, requests)
        self._count_items = not reasks
        if self._count_items:
            self.acc.start(len(requests), desc or f"{role}:{model_name}")
        # Sent in prompt-text order (the semaphore queue is FIFO): requests sharing a long prefix go one
        # after another, so a llama.cpp server reuses its KV prefix. Results stay in request order.
        order = sorted(range(len(requests)), key=lambda i: _prompt_text(requests[i]))
        if self.batch is not None:  # answers arrive in the cache; the calls below are then cache hits
            # in this thread (nothing else runs yet): SIGTERM or Ctrl-C stops the polling at once
            self.batch.prefetch(role, model_name, requests)
        return await self._all([self._one(role, model_name, r) for r in requests], order)

    async def _all(self, coros: list, order: list[int]) -> list:
        """Run the calls concurrently, started in `order`; results in the given order."""
        self._runtimes = {}  # httpx clients belong to one event loop
        self._inflight = {}  # futures too
        self._stopped = False
        started = {i: asyncio.ensure_future(coros[i]) for i in order}
        tasks = [started[i] for i in range(len(coros))]
        try:
            if not tasks:
                return []
            # The first exception (a fatal API error, the failure ceiling, a bug) cancels the rest; a full cache
            # sends nothing more but waits for the calls already sent, so every answer paid is in the call log.
            done, pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
            self._stopped = True
            if not any(isinstance(t.exception(), StorageFull) for t in done if not t.cancelled()):
                for t in pending:
                    t.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
            for t in tasks:
                if t in done and not t.cancelled() and t.exception() is not None:
                    raise t.exception()
            return [t.result() for t in tasks]
        finally:
            for t in tasks:
                t.cancel()
            for rt in self._runtimes.values():
                await rt.client.close()
            self._runtimes = {}

    # images endpoint -----------------------------------------------------------------------
    def generate_images(self, model_name: str, requests: Sequence[ImageRequest], desc: str | None = None,
                        role: str = "images") -> list[ImageResult]:
        """Images for many prompts (openai `images.generate`, response_format b64_json), concurrent under
        the endpoint's limit, results in request order. Cached content-addressed like chat answers (a
        hit makes no request); retried, counted and priced (price.per_image) like chat calls."""
        self._count_items = True
        self.acc.start(len(requests), desc or f"{role}:{model_name}")
        order = sorted(range(len(requests)), key=lambda i: requests[i].prompt)
        return asyncio.run(self._all([self._one_image(role, model_name, r) for r in requests], order))

    async def _one_image(self, role: str, model_name: str, req: ImageRequest) -> ImageResult:
        model = self.config.models[model_name]
        ep = self.config.endpoints[model.endpoint]
        params = {"size": req.size, "n": req.n, "response_format": "b64_json", **(req.params or {})}
        image_sha = hashlib.sha256(req.image).hexdigest() if req.image is not None else None
        key = image_cache_key(endpoint=ep.cache_identity, model=model.model_id, prompt=req.prompt,
                              params=params, sample_index=req.sample_index, image_sha256=image_sha)
        rec = CallRecord(key=key, role=role, model=model.name, model_id=model.model_id, endpoint=ep.name,
                         item_id=req.item_id, prompt_name=req.prompt_name, prompt_sha256=req.prompt_sha256,
                         purpose="image", status="ok", cache_hit=False)
        result = ImageResult(item_id=req.item_id, model=model_name, status="failed", calls=[rec])
        hit = await self._same_request(key)
        if isinstance(hit, str):  # the identical request sent just now failed: so does this one, unsent
            rec.status, rec.error = "failed", hit
            result.error = hit
            self._item_done("failed", req, hit)
            return result
        if hit is not None and "images" in hit["response"]:
            return self._images_from_cache(rec, result, req, hit)
        async with self._sending(key) as (answered, stored):
            if stored is not None and "images" in stored["response"]:
                return self._images_from_cache(rec, result, req, stored)
            return await self._one_image_live(rec, result, model, ep, req, params, image_sha, key, answered)

    def _images_from_cache(self, rec: CallRecord, result: ImageResult, req: ImageRequest, hit: dict) -> ImageResult:
        rec.cache_hit, rec.finish_reason = True, hit["response"]["finish_reason"]
        self.acc.add_call(rec)
        result.status, result.images = "ok", [base64.b64decode(b) for b in hit["response"]["images"]]
        self._item_done("ok", req)
        return result

    async def _one_image_live(self, rec: CallRecord, result: ImageResult, model: Model, ep: Endpoint,
                              req: ImageRequest, params: dict, image_sha: str | None, key: str,
                              answered) -> ImageResult:
        """The images call itself (a cache miss); its entry goes to identical requests waiting."""
        try:
            kwargs = {"model": model.model_id, "prompt": req.prompt, **params}
            if req.image is not None:  # an edit: the image travels as a multipart file upload
                kwargs["image"] = (f"{req.item_id}.png", req.image, "image/png")
            resp, rec.attempts, rec.latency_s = await self._send(
                self._runtime(ep), kwargs, api="images" if req.image is None else "images_edit")
            rec.answered_at = time.time()
        except _GiveUp as gu:
            rec.status, rec.error, rec.attempts = "failed", gu.reason, gu.attempts
            answered(f"its identical request ({req.item_id}) failed: {gu.reason}")
            self.acc.add_call(rec)
            result.error = gu.reason
            self._item_done("failed", req, gu.reason)
            return result
        except FatalEndpointError as fatal:
            rec.status, rec.error, rec.attempts = "failed", str(fatal), 1
            self.acc.add_call(rec)
            raise
        b64 = [d.b64_json for d in resp.data]
        usage = getattr(resp, "usage", None)  # gpt-image models report tokens; others none
        rec.tokens_in, rec.tokens_out = getattr(usage, "input_tokens", 0) or 0, getattr(usage, "output_tokens", 0) or 0
        rec.cost_usd = model.price.cost(rec.tokens_in, rec.tokens_out) + model.price.per_image * len(b64)
        rec.finish_reason = "stop"
        if not all(isinstance(b, str) and b for b in b64):
            rec.status = "failed"
            rec.error = result.error = "images endpoint answered without b64_json data (a URL instead?)"
            self.acc.add_call(rec)
            self._item_done("failed", req, result.error)
            return result
        entry = self._store(rec, key, {
            "key": key,
            "request": {"api": "images.generate" if image_sha is None else "images.edit",
                        "endpoint": ep.cache_identity, "model": model.model_id, "prompt": req.prompt,
                        "params": params, "sample_index": req.sample_index,
                        **({"image_sha256": image_sha} if image_sha else {})},
            "response": {"text": None, "finish_reason": "stop", "images": b64,
                         "usage": {"prompt_tokens": rec.tokens_in, "completion_tokens": rec.tokens_out}},
            "created": time.time(),
        })
        answered(entry)
        self.acc.add_call(rec)
        result.status, result.images = "ok", [base64.b64decode(b) for b in entry["response"]["images"]]
        self._item_done("ok", req)
        return result

    def _item_done(self, outcome: str, req: LLMRequest, reason: str | None = None) -> None:
        """Count an item's outcome. A re-ask (reasks=True) of an item counted earlier in this client
        moves its count when the outcome changes, so the job's totals match the rows it writes."""
        item = (req.item_id, req.prompt_name, req.sample_index)
        if self._count_items:
            self._outcome_of[item] = outcome
            self.acc.item_done(outcome, req.item_id, reason)
        else:
            before = self._outcome_of.get(item)
            if before is None or before == outcome:
                return
            self._outcome_of[item] = outcome
            self.acc.recount(req.item_id, before, outcome, reason)
        if outcome == "failed":
            self._check_ceiling()

    def failure_ceiling(self, items: int) -> int:
        """Failed items a job of `items` items may have: max(llm.max_failed_items, share x items)."""
        return max(self.max_failed_items, math.floor(self.max_failed_share * items + 1e-9))  # 0.29 * 100 -> 29

    def _check_ceiling(self) -> None:
        """Checked after each failed item against the items the job has asked so far."""
        failed, total = self.acc.outcomes["failed"], self.acc.items_total
        allowed = self.failure_ceiling(total)
        if failed <= allowed:
            return
        self._stopped = True
        reasons = Counter(reason for _, reason in self.acc.failed_items)
        top = "; ".join(f"{n}x {reason}" for reason, n in reasons.most_common(3))
        raise TooManyFailures(
            f"{failed} of {total} items failed, over the ceiling of {allowed} "
            f"(llm.max_failed_share={self.max_failed_share}, llm.max_failed_items={self.max_failed_items}); "
            f"no output written; reasons: {top}")

    # one request --------------------------------------------------------------------------
    def prepare(self, model_name: str, req: LLMRequest) -> tuple[list[dict], dict, dict | None, str]:
        """(messages, params, response_format, cache key) of the first call for a request.

        Used by the call path and by `aura estimate`, so both agree on what a cache hit is.
        """
        model = self.config.models[model_name]
        ep = self.config.endpoints[model.endpoint]
        messages = req.messages
        quirks = providers.quirks(getattr(ep, "provider", None), model.model_id)  # e.g. o1-mini: no system role
        style = quirks.structured_output or ep.structured_output
        if req.schema is not None and needs_schema_in_prompt(style):
            messages = self._with_schema_instruction(messages, req.schema)
        rf = response_format_for(style, req.schema, req.schema_name)
        if not quirks.system_role:
            messages = providers.fold_system(messages)
        if has_images(messages) and not model.vision:
            self._refuse_images_without_vision(model_name, [req])
        params = {**model.params, **(req.params or {})}
        extra = _extra_sampling(ep, model_name, params)  # top_k, min_p: in the body through extra_body
        if "chat_template_kwargs" in params:  # vLLM's chat-template switches (Qwen3's enable_thinking)
            if getattr(ep, "provider", None) != "vllm":
                raise FatalEndpointError(f"model '{model_name}': chat_template_kwargs is a vLLM param and endpoint "
                                         f"'{ep.name}' is not provider vllm; not sent")
            extra["chat_template_kwargs"] = params.pop("chat_template_kwargs")
        if req.grammar is not None and ep.grammar == "gbnf":
            extra["grammar"] = req.grammar
        elif req.schema is not None and style == "gbnf_schema":  # llama.cpp: the schema as a compact grammar
            extra["grammar"] = schema_grammar(req.schema, self._grammar_engine(ep))
        if extra:
            params["extra_body"] = extra
        if req.tool_choice is not None:
            params["tool_choice"] = req.tool_choice
        return messages, params, rf, self._key(ep, model, messages, params, rf, req.sample_index, req.tools)

    def _grammar_engine(self, ep: Endpoint) -> str:
        """Whose grammar form a gbnf_schema endpoint reads: the engine of a local one (llama_engine.resolve, asked
        once per endpoint); a remote llama.cpp server takes GBNF."""
        if ep.name not in self._engines:
            self._engines[ep.name] = resolve_engine(ep.local) if ep.kind == "local" else "llama-server"
        return self._engines[ep.name]

    def _refuse_images_without_vision(self, model_name: str, requests: Sequence[LLMRequest]) -> None:
        """Image parts never reach a model without `vision: true`: the job stops before any call."""
        if self.config.models[model_name].vision:
            return
        with_images = [r.item_id for r in requests if has_images(r.messages)]
        if with_images:
            raise NoVision(f"model '{model_name}' has no vision (vision: false in its config): "
                           f"{len(with_images)} request(s) carry images, first item '{with_images[0]}'; "
                           f"nothing was sent (a stage counts such items not_applicable instead)")

    @staticmethod
    def _key(ep: Endpoint, model: Model, messages, params, rf, sample_index: int, tools: list | None = None) -> str:
        return cache_key(endpoint=ep.cache_identity, model=model.model_id, messages=messages, params=params,
                         response_format=rf, tools=tools, sample_index=sample_index)

    async def _one(self, role: str, model_name: str, req: LLMRequest) -> LLMResult:
        model = self.config.models[model_name]
        ep = self.config.endpoints[model.endpoint]
        result = LLMResult(item_id=req.item_id, role=role, model=model_name, status="failed")
        messages, params, rf, key = self.prepare(model_name, req)

        rec, text, result.tool_calls = await self._complete(role, model, ep, req, messages, params, rf, "answer", key)
        result.calls.append(rec)
        if rec.status != "ok":
            result.error = rec.error
            self._item_done("failed", req, rec.error)
            return result
        result.text, result.finish_reason = text, rec.finish_reason
        if req.schema is None:
            result.status = "ok"
            self._item_done("ok", req)
            return result

        parsed, reason = parse_structured(text, req.schema)
        conversation = messages
        for _ in range(ep.repair_tries):
            if reason is None:
                break
            # The conversation grows with each round, so a second repair is a new request, not a cache hit.
            conversation = conversation + [
                {"role": "assistant", "content": text or ""},
                *self._json_repair.render(error=reason, schema=json.dumps(req.schema))[-1:],
            ]
            rec, repaired, _ = await self._complete(role, model, ep, req, conversation, params, rf, "repair")
            result.calls.append(rec)
            if rec.status != "ok":  # the endpoint failed, not the model: a failed item (retried on a rerun)
                result.text, result.status = text, "failed"
                result.error = f"the JSON repair call failed: {rec.error} (first answer: {reason})"
                self._item_done("failed", req, result.error)
                return result
            text = repaired
            parsed, reason = parse_structured(text, req.schema)
        result.text = text
        if reason is None:
            result.status, result.parsed = "ok", parsed
        else:
            result.status, result.error = "unparsed", reason
        self._item_done(result.status, req, result.error)
        return result

    def _with_schema_instruction(self, messages: list[dict], schema: dict) -> list[dict]:
        instruction = self._json_instruction.render(schema=json.dumps(schema))[-1]["content"]
        if messages and messages[0]["role"] == "system":
            return [{"role": "system", "content": messages[0]["content"] + "\n\n" + instruction}, *messages[1:]]
        return [{"role": "system", "content": instruction}, *messages]

    async def _complete(self, role: str, model: Model, ep: Endpoint, req: LLMRequest, messages: list[dict],
                        params: dict, rf: dict | None, purpose: str,
                        key: str | None = None) -> tuple[CallRecord, str | None, list[dict] | None]:
        """(call record, answer text, answer tool calls) of one call, from the cache or the endpoint."""
        key = key or self._key(ep, model, messages, params, rf, req.sample_index, req.tools)
        rec = CallRecord(key=key, role=role, model=model.name, model_id=model.model_id, endpoint=ep.name,
                         item_id=req.item_id, prompt_name=req.prompt_name, prompt_sha256=req.prompt_sha256,
                         purpose=purpose, status="ok", cache_hit=False)
        hit = await self._same_request(key)
        if isinstance(hit, str):  # the identical request sent just now failed: so does this one, unsent
            rec.status, rec.error = "failed", hit
            return rec, None, None
        if hit is not None:
            return self._from_cache(rec, key, hit)
        if purpose == "answer" and key in self._batch_failed:  # llm.batch.on_failure: failed
            rec.status, rec.error = "failed", self._batch_failed[key]
            self.acc.add_call(rec)
            return rec, None, None

        async with self._sending(key) as (answered, stored):
            if stored is not None:  # another job or run stored it after this job listed the cache
                return self._from_cache(rec, key, stored)
            return await self._complete_live(rec, model, ep, req, messages, params, rf, key, answered)

    def _from_cache(self, rec: CallRecord, key: str, hit: dict) -> tuple[CallRecord, str | None, list[dict] | None]:
        """A chat call answered by the cache entry ``hit``: recorded as a hit, nothing paid."""
        resp = hit["response"]
        rec.cache_hit = True
        if key in self._batch_answered:  # the batch's own record holds this answer's tokens and cost
            self._batch_answered.discard(key)
        else:
            rec.tokens_in, rec.tokens_out = resp["usage"]["prompt_tokens"], resp["usage"]["completion_tokens"]
            rec.tokens_reasoning = resp["usage"].get("reasoning_tokens")
        rec.finish_reason = resp["finish_reason"]
        self.acc.add_call(rec)
        return rec, resp["text"], resp.get("tool_calls")

    async def _complete_live(self, rec: CallRecord, model: Model, ep: Endpoint, req: LLMRequest, messages, params,
                             rf, key: str, answered) -> tuple[CallRecord, str | None, list[dict] | None]:
        """The call itself (a cache miss); ``answered(entry)`` hands its answer to identical requests waiting."""
        rt = self._runtime(ep)
        kwargs: dict[str, Any] = {"model": model.model_id, "messages": messages, **params}
        if rf is not None:
            kwargs["response_format"] = rf
        if req.tools:
            kwargs["tools"] = req.tools
        cut: list = []  # cut answers paid for and not kept (CutAnswer)
        check = None if req.schema is None else (
            lambda c: cut_reason(c.choices[0].message.content, c.choices[0].finish_reason, req.schema))
        try:
            completion, attempts, latency = await self._send(rt, kwargs, check=check, cut=cut)
        except _GiveUp as gu:
            rec.status, rec.error, rec.attempts = "failed", gu.reason, gu.attempts
            self._add_cut(rec, model, cut)
            answered(f"its identical request ({req.item_id}) failed: {gu.reason}")
            self.acc.add_call(rec)
            return rec, None, None
        except FatalEndpointError as fatal:
            rec.status, rec.error, rec.attempts = "failed", str(fatal), 1
            self.acc.add_call(rec)  # the call log shows the call that stopped the job
            raise
        entry, answer = completion_entry(key, ep, model, req, messages, params, rf, completion)
        for name in ("tokens_in", "tokens_out", "tokens_cached", "tokens_reasoning", "timings", "finish_reason"):
            setattr(rec, name, getattr(answer, name))
        rec.latency_s, rec.attempts, rec.answered_at = latency, attempts, time.time()
        rec.cost_usd = model.price.cost(rec.tokens_in, rec.tokens_out, rec.tokens_cached)  # cached at price.cached_input
        stored = self._store(rec, key, entry)
        if stored is not entry:  # another job stored its answer of this key first: use that one, as the cache does
            usage = stored["response"]["usage"]  # (this call is paid all the same: cost_usd stays ours)
            rec.finish_reason = stored["response"]["finish_reason"]
            rec.tokens_in, rec.tokens_out = usage["prompt_tokens"], usage["completion_tokens"]
            rec.tokens_reasoning = usage.get("reasoning_tokens")
        self._add_cut(rec, model, cut)
        answered(stored)
        self.acc.add_call(rec)
        return rec, stored["response"]["text"], stored["response"].get("tool_calls")

    @staticmethod
    def _add_cut(rec: CallRecord, model: Model, cut: list) -> None:
        """Add the tokens and cost of the cut answers a call asked again (paid, not cached) to its record."""
        for completion in cut:
            tokens_in, tokens_out, reasoning = usage_counts(completion.usage)
            rec.tokens_in, rec.tokens_out = rec.tokens_in + tokens_in, rec.tokens_out + tokens_out
            if reasoning is not None:
                rec.tokens_reasoning = (rec.tokens_reasoning or 0) + reasoning
            cached = getattr(getattr(completion.usage, "prompt_tokens_details", None), "cached_tokens", None)
            rec.cost_usd += model.price.cost(tokens_in, tokens_out, cached)

    def _store(self, rec: CallRecord, key: str, entry: dict) -> dict:
        """Cache a paid answer. A cache that cannot store it (full) stops the job: the call is recorded with its
        cost first (paid, not stored), nothing more is sent, and the calls already sent finish (:meth:`_all`)."""
        try:
            return self.cache.put(key, entry)
        except StorageFull as exc:
            rec.error = "paid, not stored: the cache folder is full"
            self.acc.add_call(rec)
            self._stopped = True
            raise

    # identical requests: sent once -------------------------------------------------------
    async def _same_request(self, key: str) -> dict | str | None:
        """The cached entry of ``key``; while a call of the same key is on its way in this job, what it
        ends with: its entry, or why it failed (a string: this request fails with it, unsent), or None
        when it ended without either (the job stopping), and this request goes itself."""
        hit = self.cache.get(key)
        while hit is None and key in self._inflight:
            hit = await asyncio.shield(self._inflight[key])
        return hit

    @contextlib.asynccontextmanager
    async def _sending(self, key: str):
        """Mark ``key`` as on its way in this job and claim it across jobs and runs (Cache.claim); yields
        ``(answered, stored)``: ``answered(entry or reason)`` hands the entry (or why the call failed) to the
        requests of this job waiting for it (:meth:`_same_request`; None if it ends without), and ``stored`` is
        the entry another job or run stored before the claim was won (then nothing is sent). The claim is held
        while the call waits for its concurrency slot and is sent, so no other job sends the key meanwhile."""
        future = asyncio.get_running_loop().create_future()
        self._inflight[key] = future

        def answered(outcome: dict | str | None) -> None:
            if not future.done():
                future.set_result(outcome)
        try:
            async with self.cache.claim(key) as stored:
                if stored is not None:
                    answered(stored)
                yield answered, stored
        finally:
            if self._inflight.get(key) is future:
                del self._inflight[key]
            answered(None)

    def _runtime(self, ep: Endpoint) -> _EndpointRuntime:
        rt = self._runtimes.get(ep.name)
        if rt is None:
            if ep.kind != "local":
                self._check_preflight()
            base_url = self._base_url(ep)
            rt = self._runtimes[ep.name] = _EndpointRuntime(ep, base_url, self._tokens.get(ep.name),
                                                            self._slots.get(ep.name))
        return rt

    def _check_preflight(self) -> None:
        """llm.require_preflight: the first remote call (or batch) of a job needs a passing preflight of this
        config (aura.preflight writes it)."""
        message = gate_message(self.config)
        if message:
            self._stopped = True
            raise FatalEndpointError(message)

    def _base_url(self, ep: Endpoint) -> str:
        """A local endpoint's server starts on the first cache miss: a warm rerun starts none."""
        if ep.kind != "local":
            return ep.base_url
        if ep.name not in self._base_urls:
            server = LocalServer(ep.local, server_registry(self.cache.root)).start()
            self._servers.append(server)
            self._base_urls[ep.name] = server.base_url
            self._tokens[ep.name] = server.token
            self._slots[ep.name] = server.slots
        return self._base_urls[ep.name]

    async def _send(self, rt: _EndpointRuntime, kwargs: dict, api: str = "chat", check=None, cut: list | None = None):
        """Retry transient failures (errors.is_retryable) up to max_tries; a Retry-After the server
        sends is waited, a missing or unusable one falls back to jittered exponential backoff.

        ``check(completion)`` says why an answer is cut (None when whole): such an answer goes into ``cut``
        and is asked again at once, within the same max_tries (CutAnswer)."""
        ep = rt.ep
        for attempt in range(1, ep.max_tries + 1):
            try:
                async with rt.sem:
                    if self._stopped:  # the job is stopping: no request after a fatal error
                        raise asyncio.CancelledError()
                    t0 = self._clock()
                    if api == "images":
                        completion = await rt.client.images.generate(**kwargs)
                    elif api == "images_edit":
                        completion = await rt.client.images.edit(**kwargs)
                    else:
                        completion = await rt.client.chat.completions.create(**kwargs)
                    latency = self._clock() - t0
                is_image = api in ("images", "images_edit")
                if not getattr(completion, "data" if is_image else "choices", None):
                    raise EmptyChoices(f"response has no {'images' if is_image else 'choices'}")
                why = check(completion) if check is not None else None
                if why:
                    cut.append(completion)
                    raise CutAnswer(why)
                return completion, attempt, latency
            except Exception as exc:  # noqa: BLE001 - classified below, never swallowed silently
                if not is_retryable(exc):
                    if is_item_level(exc):
                        raise _GiveUp(f"non-retryable {describe(exc)}", attempt) from exc
                    self._stopped = True
                    raise FatalEndpointError(
                        f"endpoint '{ep.name}' ({rt.base_url}), model '{kwargs['model']}': "
                        f"non-retryable {describe(exc)}") from exc
                if attempt == ep.max_tries:
                    raise _GiveUp(f"gave up after {attempt} tries: {describe(exc)}", attempt) from exc
                if isinstance(exc, CutAnswer):
                    continue  # the server is well: nothing to wait for
                wait = retry_after_s(exc)
                await self._sleep(wait if wait is not None
                                  else backoff_s(attempt, ep.backoff_base_s, ep.backoff_max_s, self._rng))
        raise AssertionError("unreachable")
