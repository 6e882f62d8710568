"""Batch APIs for single-turn calls: answers land in the response cache before the stage runs.

For the roles in ``llm.batch.roles`` on an endpoint with ``batch: true`` (the OpenAI Batch API; for
``batch: anthropic`` see the last paragraph), `LLMClient.run` first hands
the first calls it has no cached answer for to `BatchRunner.prefetch`: one JSONL line per distinct
cache key (``custom_id`` = the key), uploaded with ``files.create``, sent with ``batches.create``,
polled with doubling waits (``poll_s`` up to ``poll_max_s``), and each answer of the output file is
written to the cache under the key and in the entry a live call writes. The stage then runs as usual
and finds every answer in the cache; JSON repairs and rule re-asks (multi-turn) go live.

A batch is remembered in ``state_dir`` (default ``batches/`` next to the cache folder; one JSON file per
batch, named by a hash of its endpoint, model, keys and round), written atomically before the upload and
again with the batch id before polling starts. A job first looks there, under a lock per endpoint and
model, for batches holding its keys: an open one (a killed run's, or another job's) is polled, never
resent; a finished one settles its keys (what it did not answer goes live, not into a new batch). Killed
between ``batches.create`` and the state write, the rerun finds the batch by its ``metadata.aura_state``.
More than ``max_requests`` calls are split over several batches, all submitted before any is polled.
Delete a state file to send its requests through a batch again.

An answer the batch reports as an error goes live (``on_failure: live``) or fails its item
(``failed``). An expired or cancelled batch keeps the answers it finished; its other requests go in
a new batch (``on_expired: resubmit``, up to ``max_resubmits``) or live.

The provider's own calls sit behind `BatchAPI` (build a request, upload, create, find, retrieve, read
results); the state files, the lock, resuming and the cache entries are this module's, the same for each.
``batch: true`` / ``openai``: `OpenAIBatchAPI` below; ``batch: anthropic``: Anthropic's Message Batches
API (aura.llm.batch_anthropic).
"""
from __future__ import annotations

import fcntl
import json
import time
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Sequence

import openai
from openai.types.chat import ChatCompletion

from ..io import atomic_write_json, canonical_json, sha256_text
from .batch_api import BatchAPI, BatchView, _Pending
from .errors import FatalEndpointError, StageFailed, backoff_s, describe, endpoint_key, is_retryable

if TYPE_CHECKING:
    from ..config import Endpoint, Model
    from .types import LLMRequest

TERMINAL = {"completed", "failed", "expired", "cancelled"}
CHAT_PATH = "/v1/chat/completions"


class BatchStillRunning(StageFailed):
    """The batch outlived llm.batch.max_wait_s: the job stops; its rerun resumes the same batch."""


def batch_api(ep: "Endpoint", options: dict, claimed: Callable[[], set[str]] = set) -> BatchAPI:
    """The adapter of the batch API the endpoint names (``batch: true | openai | anthropic``)."""
    key = endpoint_key(ep)
    if ep.batch_api == "anthropic":
        from .batch_anthropic import AnthropicBatchAPI
        return AnthropicBatchAPI(ep, key, options, claimed)
    return OpenAIBatchAPI(ep, key, options, claimed)


class OpenAIBatchAPI:
    """The OpenAI Batch API: a JSONL file (/v1/files) and a batch of it (/v1/batches), the state name in
    the batch's metadata; answers and errors in its output and error files."""
    kind, label = "openai", "Batch API"
    errors = (openai.OpenAIError,)

    def __init__(self, ep: "Endpoint", key: str | None, options: dict, claimed: Callable[[], set[str]]):
        self.opt = options
        # the client's own retries (with backoff) cover the few management calls of a batch
        self.client = openai.OpenAI(base_url=ep.base_url, api_key=key or "not-needed",
                                    max_retries=ep.max_tries - 1, timeout=ep.timeout_s)

    def request(self, key: str, p: "_Pending", model: "Model") -> dict:
        return {"custom_id": key, "method": "POST", "url": CHAT_PATH, "body": p.body(model.model_id)}

    def upload(self, name: str, requests: list[dict]) -> dict:
        lines = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in requests)
        upload = self.client.files.create(file=(f"aura-{name}.jsonl", lines.encode("utf-8"), "application/jsonl"),
                                          purpose="batch")
        return {"input_file_id": upload.id}

    def create(self, state: dict, requests: list[dict]) -> dict:
        batch = self.client.with_options(max_retries=0).batches.create(
            input_file_id=state["input_file_id"], endpoint=CHAT_PATH,
            completion_window=self.opt["completion_window"], metadata={"aura_state": state["name"]})
        return {"batch_id": batch.id}

    def listing(self) -> None:
        self.client.batches.list(limit=1)

    def find(self, state: dict) -> dict | None:
        """The live batch whose metadata names this state, among those created since the state was written
        (the list is newest first: paging stops at the first older batch, with an hour for clock skew)."""
        since = state.get("created") or 0.0
        for batch in self.client.batches.list(limit=100):  # iterating the page fetches the next ones
            if batch.created_at < since - 3600:
                return None
            if ((batch.metadata or {}).get("aura_state") == state["name"]
                    and batch.status not in ("failed", "cancelled")):
                return {"batch_id": batch.id, "input_file_id": batch.input_file_id}
        return None

    def retrieve(self, batch_id: str) -> BatchView:
        batch = self.client.batches.retrieve(batch_id)
        done = batch.status in TERMINAL
        error = None
        if batch.status == "failed":  # the whole batch was refused (e.g. a bad input line)
            error = "; ".join(e.message or "" for e in (batch.errors.data if batch.errors else []) or []) or "no reason"
        return BatchView(batch.id, batch.status, done, batch.status if done else None, error, batch)

    def results(self, batch: BatchView) -> Iterator[tuple[str, Any]]:
        for file_id in (batch.raw.output_file_id, batch.raw.error_file_id):
            if not file_id:
                continue
            for line in self.client.files.content(file_id).text.splitlines():
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except ValueError:
                    raise StageFailed(f"batch {batch.id}: file {file_id} has a line that is not JSON: "
                                      f"{line[:80]!r}") from None
                yield row.get("custom_id"), self._outcome(row, batch.id)

    @staticmethod
    def _outcome(row: dict, batch_id: str):
        resp = row.get("response") or {}
        if row.get("error") or resp.get("status_code") != 200:
            err = row.get("error") or (resp.get("body") or {}).get("error") or {}
            reason = (f"batch {batch_id}: {err.get('code') or resp.get('status_code')}: "
                      f"{err.get('message') or 'no message'}")
            return None if "batch_expired" in reason or "batch_cancelled" in reason else reason
        try:
            completion = ChatCompletion.model_validate(resp["body"])
        except (KeyError, ValueError) as exc:
            return f"batch {batch_id}: answer is not a chat completion ({str(exc).splitlines()[0]})"
        if not completion.choices:
            return f"batch {batch_id}: response has no choices"
        return completion

    def retryable(self, exc: BaseException) -> bool:
        return is_retryable(exc)

    def describe(self, exc: BaseException) -> str:
        return describe(exc)

    def close(self) -> None:
        self.client.close()


def single_turn(req: "LLMRequest") -> bool:
    """A first call with no earlier answer in it and no tools: the only kind sent through a batch."""
    return not req.tools and all(m.get("role") in ("system", "developer", "user") for m in req.messages)


class BatchRunner:
    def __init__(self, client, options: dict, *, sleep: Callable[[float], None] = time.sleep,
                 clock: Callable[[], float] = time.monotonic):
        self.client = client
        self.opt = options
        self.roles = set(options.get("roles") or [])
        root = options.get("state_dir") or Path(client.cache.root).parent / "batches"
        self.state_dir = Path(root)
        self._sleep, self._clock = sleep, clock

    def applies(self, role: str, ep: "Endpoint") -> bool:
        return role in self.roles and ep.batch_api is not None and ep.kind == "openai"

    # entry point ------------------------------------------------------------------------------
    def prefetch(self, role: str, model_name: str, requests: Sequence["LLMRequest"]) -> None:
        """Fill the cache with batch answers for the requests' uncached first calls (see module doc)."""
        client = self.client
        model = client.config.models[model_name]
        ep = client.config.endpoints[model.endpoint]
        if not self.applies(role, ep):
            return
        pending: dict[str, _Pending] = {}
        for req in requests:
            if not single_turn(req):
                continue
            messages, params, rf, key = client.prepare(model_name, req)
            if key not in pending and not client.cache.contains(key):
                pending[key] = _Pending(req, messages, params, rf)
        if not pending:
            return
        client._check_preflight()  # llm.require_preflight: a batch is paid too
        api = self._api(ep)
        size = int(self.opt["max_requests"])
        try:
            # every request built first: one the API cannot take stops the job before anything is sent
            requests = {k: api.request(k, p, model) for k, p in pending.items()}
            todo = set(pending)
            for round_ in range(int(self.opt["max_resubmits"]) + 1):
                if not todo or (round_ and self.opt["on_expired"] != "resubmit"):
                    break  # what is left goes live
                with self._lock(ep, model):  # one job at a time checks what is in flight and submits the rest
                    states = self._known(api, ep, model, todo) if round_ == 0 else []
                    keys = sorted(todo.difference(*(s["keys"] for s in states)))
                    # all parts submitted before any is polled: the provider runs them side by side
                    states += [self._submit(api, keys[i:i + size], requests, model, ep, round_)
                               for i in range(0, len(keys), size)]
                for state in states:
                    todo -= self._finish(api, state, pending, role, model, ep)
        except api.errors as exc:  # the batch API's own calls (upload, create, list, poll, download)
            what = f"endpoint '{ep.name}': {api.label}"
            if api.retryable(exc):
                raise StageFailed(f"{what} still failing after {ep.max_tries} tries ({api.describe(exc)}); "
                                  f"a rerun resumes the batches kept in {self.state_dir}") from None
            raise FatalEndpointError(f"{what} refused a request: {api.describe(exc)}") from None
        finally:
            api.close()

    # the endpoint ----------------------------------------------------------------------------
    def _api(self, ep: "Endpoint") -> BatchAPI:
        return batch_api(ep, self.opt, self._claimed)

    # state files -----------------------------------------------------------------------------
    def _name(self, api: BatchAPI, ep: "Endpoint", model: "Model", keys: list[str], round_: int) -> str:
        parts = [ep.cache_identity, model.model_id, keys, round_] + ([api.kind] if api.kind != "openai" else [])
        return sha256_text(canonical_json(parts))[:32]

    def _write(self, state: dict) -> None:
        atomic_write_json(self.state_dir / f"{state['name']}.json", state)

    def _states(self) -> Iterator[dict]:
        for path in sorted(self.state_dir.glob("*.json")) if self.state_dir.is_dir() else []:
            try:
                yield json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue  # written atomically: only a hand-edited file can be unreadable

    def _claimed(self) -> set[str]:
        """The batch ids the state files already name (a batch found for a lost create is never one of them)."""
        return {s["batch_id"] for s in self._states() if s.get("batch_id")}

    def _known(self, api: BatchAPI, ep: "Endpoint", model: "Model", keys: set[str]) -> list[dict]:
        """Earlier batches holding any of these keys (a killed run's, another job's): an open one is polled,
        never resent; a finished one settles its keys (answered, failed or expired there: whatever is not
        cached now goes live, not into another batch)."""
        found = []
        for state in self._states():
            if (state.get("endpoint") == ep.cache_identity and state.get("model") == model.model_id
                    and state.get("api", "openai") == api.kind and keys & set(state.get("keys", []))):
                if state.get("status") == "submitting":  # its job died while submitting (we hold the lock)
                    state = self._adopt(api, state)
                if state is not None:
                    found.append(state)
        return found

    @contextmanager
    def _lock(self, ep: "Endpoint", model: "Model"):
        self.state_dir.mkdir(parents=True, exist_ok=True)
        path = self.state_dir / f".{sha256_text(ep.cache_identity + chr(0) + model.model_id)[:16]}.lock"
        with open(path, "a") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    def _submit(self, api: BatchAPI, keys: list[str], requests: dict[str, dict], model: "Model",
                ep: "Endpoint", round_: int) -> dict:
        """The batch of these keys (round 0: first batch, k: k-th resubmission of an expired batch's rest):
        an open one (another job's, or one created before a kill), else a new one."""
        name = self._name(api, ep, model, keys, round_)
        path = self.state_dir / f"{name}.json"
        if path.exists():
            state = json.loads(path.read_text(encoding="utf-8"))
            if state.get("batch_id") or state.get("status") == "done":
                return state
            adopted = self._adopt(api, state)
            if adopted is not None:
                return adopted
        state = {"name": name, "api": api.kind, "endpoint": ep.cache_identity, "model": model.model_id,
                 "keys": keys, "status": "submitting", "batch_id": None, "created": time.time()}
        self._write(state)
        lines = [requests[k] for k in keys]
        state.update(api.upload(name, lines))
        state.update(self._create(api, ep, state, lines), status="submitted")
        self._write(state)  # before the first poll: a rerun resumes this batch
        return state

    def _create(self, api: BatchAPI, ep: "Endpoint", state: dict, lines: list[dict]) -> dict:
        """The create without the client's own retries: a create whose response was lost may have made the
        batch, so before each new try the batch is looked up (`BatchAPI.find`; never two batches)."""
        for attempt in range(1, ep.max_tries + 1):
            try:
                return api.create(state, lines)
            except api.errors as exc:
                if not api.retryable(exc) or attempt == ep.max_tries:
                    raise
                made = api.find(state)
                if made is not None:
                    return made
                self._sleep(backoff_s(attempt, ep.backoff_base_s, ep.backoff_max_s))
        raise AssertionError("unreachable")

    def _adopt(self, api: BatchAPI, state: dict) -> dict | None:
        """A state written before a kill between the create and the state's update: `BatchAPI.find` names its
        batch. None when no such batch exists (the state file is removed)."""
        found = api.find(state)
        if found is not None:
            state = {**state, **found, "status": "submitted"}
            self._write(state)
            return state
        (self.state_dir / f"{state['name']}.json").unlink(missing_ok=True)
        return None

    # polling and results ---------------------------------------------------------------------
    def _poll(self, api: BatchAPI, state: dict) -> BatchView:
        wait, start = float(self.opt["poll_s"]), self._clock()
        while True:
            batch = api.retrieve(state["batch_id"])
            if batch.done:
                return batch
            waited = self._clock() - start
            if waited >= self.opt["max_wait_s"]:
                raise BatchStillRunning(
                    f"batch {batch.id} ({len(state['keys'])} requests) still {batch.status} after {waited:.0f} s "
                    f"(llm.batch.max_wait_s); a rerun resumes it ({self.state_dir / (state['name'] + '.json')})")
            self._sleep(min(wait, max(0.0, self.opt["max_wait_s"] - waited)))
            wait = min(wait * 2, float(self.opt["poll_max_s"]))

    def _finish(self, api: BatchAPI, state: dict, pending: dict[str, _Pending], role: str,
                model: "Model", ep: "Endpoint") -> set[str]:
        """Poll a batch to its end and cache its answers; returns the keys of `pending` it settled (all of
        them, except those an expired or cancelled batch left unanswered: to resubmit or send live)."""
        if state.get("status") == "done":  # finished by an earlier run: its failures stand, the rest goes live
            self._failed(state.get("failed") or {})
            return set(state["keys"])
        batch = self._poll(api, state)
        answered: set[str] = set()
        failed: dict[str, str] = {}
        for key, outcome in api.results(batch):
            if key not in pending or key in answered or outcome is None:
                continue  # another job's key (a shared batch), answered already, or not run (expired, cancelled)
            if isinstance(outcome, str):  # why the batch failed this request
                failed[key] = outcome
            else:
                self._store(outcome, pending[key], key, role, model, ep, batch.id)
                answered.add(key)
        if batch.final == "failed":  # the whole batch was refused (e.g. a bad input line)
            failed.update({k: f"batch {batch.id} failed: {batch.error}" for k in state["keys"]
                           if k in pending and k not in answered})
        self._failed(failed)
        with self._lock(ep, model):  # jobs sharing this batch each add their own keys' failures
            path = self.state_dir / f"{state['name']}.json"
            try:
                earlier = json.loads(path.read_text(encoding="utf-8")).get("failed") or {}
            except (OSError, ValueError):
                earlier = {}
            state.update(status="done", final_status=batch.final, failed={**earlier, **failed})
            self._write(state)
        keys = set(state["keys"])
        return answered | set(failed) if batch.final in ("expired", "cancelled") else keys

    def _failed(self, failed: dict[str, str]) -> None:
        """on_failure failed: these first calls fail their items instead of going live."""
        if self.opt["on_failure"] == "failed":
            self.client._batch_failed.update(failed)

    def _store(self, completion: ChatCompletion, p: _Pending, key: str, role: str, model: "Model",
               ep: "Endpoint", batch_id: str) -> None:
        """Cache one answer (a chat completion, whichever API gave it) in the entry a live call writes. A
        structured answer the output cap cut (structured.cut_reason) is paid and recorded, never cached: the
        stage asks it live, where it is retried like any cut answer."""
        from .structured import cut_reason
        from .types import completion_entry
        entry, rec = completion_entry(key, ep, model, p.req, p.messages, p.params, p.rf, completion)
        rec.role, rec.purpose, rec.batch_id = role, "answer", batch_id
        rec.cost_usd = model.price.cost(rec.tokens_in, rec.tokens_out, rec.tokens_cached, batch=True)
        cut = cut_reason(entry["response"]["text"], rec.finish_reason, p.req.schema)
        if cut:
            rec.error = f"{cut}; not cached, asked again live"
            self.client.acc.add_call(rec)
            return
        self.client.cache.put(key, entry)
        self.client.acc.add_call(rec)
        self.client._batch_answered.add(key)
