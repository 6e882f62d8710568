"""OpenAI Batch API for single-turn calls: answers land in the response cache before the stage runs.

For the roles in ``llm.batch.roles`` on an endpoint with ``batch: true``, `LLMClient.run` first hands
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
"""
from __future__ import annotations

import fcntl
import json
import os
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Sequence

import openai
from openai.types.chat import ChatCompletion

from ..io import atomic_write_json, canonical_json, sha256_text
from .errors import FatalEndpointError, StageFailed, backoff_s, describe, is_retryable

if TYPE_CHECKING:
    from ..config import Endpoint, Model
    from .types import LLMRequest

TERMINAL = {"completed", "failed", "expired", "cancelled"}
CHAT_PATH = "/v1/chat/completions"


class BatchStillRunning(StageFailed):
    """The batch outlived llm.batch.max_wait_s: the job stops; its rerun resumes the same batch."""


@dataclass
class _Pending:
    req: "LLMRequest"
    messages: list[dict]
    params: dict
    rf: dict | None

    def body(self, model_id: str) -> dict:
        params = dict(self.params)
        body = {"model": model_id, "messages": self.messages, **params}
        body.update(body.pop("extra_body", None) or {})  # a batch line is the raw HTTP body
        if self.rf is not None:
            body["response_format"] = self.rf
        if self.req.tools:
            body["tools"] = self.req.tools
        return body


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
        return role in self.roles and ep.batch and ep.kind == "openai"

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
        api = self._api(ep)
        size = int(self.opt["max_requests"])
        try:
            todo = set(pending)
            for round_ in range(int(self.opt["max_resubmits"]) + 1):
                if not todo or (round_ and self.opt["on_expired"] != "resubmit"):
                    break  # what is left goes live
                with self._lock(ep, model):  # one job at a time checks what is in flight and submits the rest
                    states = self._known(api, ep, model, todo) if round_ == 0 else []
                    keys = sorted(todo.difference(*(s["keys"] for s in states)))
                    # all parts submitted before any is polled: the provider runs them side by side
                    states += [self._submit(api, keys[i:i + size], pending, model, ep, round_)
                               for i in range(0, len(keys), size)]
                for state in states:
                    todo -= self._finish(api, state, pending, role, model, ep)
        except openai.OpenAIError as exc:  # the Batch API's own calls (upload, create, list, poll, download)
            if is_retryable(exc):
                raise StageFailed(f"endpoint '{ep.name}': Batch API still failing after {ep.max_tries} tries "
                                  f"({describe(exc)}); a rerun resumes the batches kept in {self.state_dir}") from None
            raise FatalEndpointError(f"endpoint '{ep.name}': Batch API refused a request: {describe(exc)}") from None
        finally:
            api.close()

    # the endpoint ----------------------------------------------------------------------------
    def _api(self, ep: "Endpoint") -> openai.OpenAI:
        key = os.environ.get(ep.api_key_env) if ep.api_key_env else None
        if ep.api_key_env and not key:
            raise FatalEndpointError(f"endpoint '{ep.name}': environment variable {ep.api_key_env} is not set")
        # the client's own retries (with backoff) cover the few management calls of a batch
        return openai.OpenAI(base_url=ep.base_url, api_key=key or "not-needed", max_retries=ep.max_tries - 1,
                             timeout=ep.timeout_s)

    # state files -----------------------------------------------------------------------------
    def _name(self, ep: "Endpoint", model: "Model", keys: list[str], round_: int) -> str:
        return sha256_text(canonical_json([ep.cache_identity, model.model_id, keys, round_]))[:32]

    def _write(self, state: dict) -> None:
        atomic_write_json(self.state_dir / f"{state['name']}.json", state)

    def _known(self, api: openai.OpenAI, ep: "Endpoint", model: "Model", keys: set[str]) -> list[dict]:
        """Earlier batches holding any of these keys (a killed run's, another job's): an open one is polled,
        never resent; a finished one settles its keys (answered, failed or expired there: whatever is not
        cached now goes live, not into another batch)."""
        found = []
        for path in sorted(self.state_dir.glob("*.json")) if self.state_dir.is_dir() else []:
            try:
                state = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue  # written atomically: only a hand-edited file can be unreadable
            if (state.get("endpoint") == ep.cache_identity
                    and state.get("model") == model.model_id and keys & set(state.get("keys", []))):
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

    def _submit(self, api: openai.OpenAI, keys: list[str], pending: dict[str, _Pending], model: "Model",
                ep: "Endpoint", round_: int) -> dict:
        """The batch of these keys (round 0: first batch, k: k-th resubmission of an expired batch's rest):
        an open one (another job's, or one created before a kill), else a new one."""
        name = self._name(ep, model, keys, round_)
        path = self.state_dir / f"{name}.json"
        if path.exists():
            state = json.loads(path.read_text(encoding="utf-8"))
            if state.get("batch_id") or state.get("status") == "done":
                return state
            adopted = self._adopt(api, state)
            if adopted is not None:
                return adopted
        state = {"name": name, "endpoint": ep.cache_identity, "model": model.model_id, "keys": keys,
                 "status": "submitting", "batch_id": None, "input_file_id": None, "created": time.time()}
        self._write(state)
        lines = "".join(json.dumps({"custom_id": k, "method": "POST", "url": CHAT_PATH,
                                    "body": pending[k].body(model.model_id)}, ensure_ascii=False) + "\n"
                        for k in keys)
        upload = api.files.create(file=(f"aura-{name}.jsonl", lines.encode("utf-8"), "application/jsonl"),
                                  purpose="batch")
        batch = self._create(api, ep, upload.id, name, state["created"])
        state.update(batch_id=batch.id, input_file_id=upload.id, status="submitted")
        self._write(state)  # before the first poll: a rerun resumes this batch
        return state

    def _create(self, api: openai.OpenAI, ep: "Endpoint", file_id: str, name: str, since: float):
        """batches.create without the client's own retries: a create whose response was lost may have made
        the batch, so before each new try the batch is looked up by its metadata (never two batches)."""
        once = api.with_options(max_retries=0)
        for attempt in range(1, ep.max_tries + 1):
            try:
                return once.batches.create(input_file_id=file_id, endpoint=CHAT_PATH,
                                           completion_window=self.opt["completion_window"],
                                           metadata={"aura_state": name})
            except openai.OpenAIError as exc:
                if not is_retryable(exc) or attempt == ep.max_tries:
                    raise
                made = self._find(api, name, since)
                if made is not None:
                    return made
                self._sleep(backoff_s(attempt, ep.backoff_base_s, ep.backoff_max_s))

    def _find(self, api: openai.OpenAI, name: str, since: float):
        """The live batch whose metadata names this state, among those created since the state was written
        (the list is newest first: paging stops at the first older batch, with an hour for clock skew)."""
        for batch in api.batches.list(limit=100):  # iterating the page fetches the next ones
            if batch.created_at < since - 3600:
                return None
            if (batch.metadata or {}).get("aura_state") == name and batch.status not in ("failed", "cancelled"):
                return batch
        return None

    def _adopt(self, api: openai.OpenAI, state: dict) -> dict | None:
        """A state written before a kill between batches.create and the state's update: its batch carries the
        state's name in its metadata. None when no such batch exists (the state file is removed)."""
        batch = self._find(api, state["name"], state.get("created") or 0.0)
        if batch is not None:
            state = {**state, "batch_id": batch.id, "input_file_id": batch.input_file_id, "status": "submitted"}
            self._write(state)
            return state
        (self.state_dir / f"{state['name']}.json").unlink(missing_ok=True)
        return None

    # polling and results ---------------------------------------------------------------------
    def _poll(self, api: openai.OpenAI, state: dict):
        wait, start = float(self.opt["poll_s"]), self._clock()
        while True:
            batch = api.batches.retrieve(state["batch_id"])
            if batch.status in TERMINAL:
                return batch
            waited = self._clock() - start
            if waited >= self.opt["max_wait_s"]:
                raise BatchStillRunning(
                    f"batch {batch.id} ({len(state['keys'])} requests) still {batch.status} after {waited:.0f} s "
                    f"(llm.batch.max_wait_s); a rerun resumes it ({self.state_dir / (state['name'] + '.json')})")
            self._sleep(min(wait, max(0.0, self.opt["max_wait_s"] - waited)))
            wait = min(wait * 2, float(self.opt["poll_max_s"]))

    def _finish(self, api: openai.OpenAI, state: dict, pending: dict[str, _Pending], role: str,
                model: "Model", ep: "Endpoint") -> set[str]:
        """Poll a batch to its end and cache its answers; returns the keys of `pending` it settled (all of
        them, except those an expired or cancelled batch left unanswered: to resubmit or send live)."""
        if state.get("status") == "done":  # finished by an earlier run: its failures stand, the rest goes live
            self._failed(state.get("failed") or {})
            return set(state["keys"])
        batch = self._poll(api, state)
        answered: set[str] = set()
        failed: dict[str, str] = {}
        for file_id in (batch.output_file_id, batch.error_file_id):
            if not file_id:
                continue
            for line in api.files.content(file_id).text.splitlines():
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except ValueError:
                    raise StageFailed(f"batch {batch.id}: file {file_id} has a line that is not JSON: "
                                      f"{line[:80]!r}") from None
                key = row.get("custom_id")
                if key not in pending or key in answered:
                    continue  # another job's key (a shared batch), or answered already
                reason = self._store(row, pending[key], key, role, model, ep, batch.id)
                if reason is None:
                    answered.add(key)
                elif "batch_expired" not in reason and "batch_cancelled" not in reason:
                    failed[key] = reason
        if batch.status == "failed":  # the whole batch was refused (e.g. a bad input line)
            why = "; ".join(e.message or "" for e in (batch.errors.data if batch.errors else []) or []) or "no reason"
            failed.update({k: f"batch {batch.id} failed: {why}" for k in state["keys"]
                           if k in pending and k not in answered})
        self._failed(failed)
        with self._lock(ep, model):  # jobs sharing this batch each add their own keys' failures
            path = self.state_dir / f"{state['name']}.json"
            try:
                earlier = json.loads(path.read_text(encoding="utf-8")).get("failed") or {}
            except (OSError, ValueError):
                earlier = {}
            state.update(status="done", final_status=batch.status, failed={**earlier, **failed})
            self._write(state)
        keys = set(state["keys"])
        return answered | set(failed) if batch.status in ("expired", "cancelled") else keys

    def _failed(self, failed: dict[str, str]) -> None:
        """on_failure failed: these first calls fail their items instead of going live."""
        if self.opt["on_failure"] == "failed":
            self.client._batch_failed.update(failed)

    def _store(self, row: dict, p: _Pending, key: str, role: str, model: "Model", ep: "Endpoint",
               batch_id: str) -> str | None:
        """Cache one answered line as a live call would; the reason when the line is not an answer."""
        resp = row.get("response") or {}
        if row.get("error") or resp.get("status_code") != 200:
            err = row.get("error") or (resp.get("body") or {}).get("error") or {}
            return (f"batch {batch_id}: {err.get('code') or resp.get('status_code')}: "
                    f"{err.get('message') or 'no message'}")
        try:
            completion = ChatCompletion.model_validate(resp["body"])
        except (KeyError, ValueError) as exc:
            return f"batch {batch_id}: answer is not a chat completion ({str(exc).splitlines()[0]})"
        if not completion.choices:
            return f"batch {batch_id}: response has no choices"
        from .types import completion_entry
        entry, rec = completion_entry(key, ep, model, p.req, p.messages, p.params, p.rf, completion)
        rec.role, rec.purpose, rec.batch_id = role, "answer", batch_id
        rec.cost_usd = model.price.cost(rec.tokens_in, rec.tokens_out, rec.tokens_cached, batch=True)
        self.client.cache.put(key, entry)
        self.client.acc.add_call(rec)
        self.client._batch_answered.add(key)
        return None
