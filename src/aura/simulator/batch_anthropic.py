"""A fake of Anthropic's native Message Batches API over real HTTP on 127.0.0.1 (standard library
``http.server``), so the official ``anthropic`` SDK talks to it unmodified.

Endpoints (the shapes of https://docs.anthropic.com/en/api/creating-message-batches and its siblings)::

    POST /v1/messages/batches            {requests: [{custom_id, params}]} -> a message_batch, in_progress
    GET  /v1/messages/batches/{id}       the batch; each retrieve is one poll: after `in_progress_polls`
                                         polls answered in_progress, the batch ends (its results are made)
    GET  /v1/messages/batches/{id}/results   the results JSONL (its results_url), one line per request
    GET  /v1/messages/batches?limit=&after_id=   newest first, a page at a time (has_more)

Every request needs an API key (x-api-key, or Authorization: Bearer as SDK 2.x sends it) and an
anthropic-version header (else 401). A create is checked as Anthropic checks it: 1 to
100,000 requests, each custom_id unique and matching ^[a-zA-Z0-9_-]{1,64}$, params with model, max_tokens
>= 1, a non-empty messages list of user/assistant turns, and no field the Messages API does not know
(else 400 invalid_request_error).

Rules (first matching, non-exhausted rule wins; applied to each request when its batch ends)::

    {"match": {"contains": "text", "custom_id": "...", "model": "..."},  # all optional
     "times": 1,                                   # only the first matching request
     "result": "succeeded" | "errored" | "expired" | "canceled",        # default succeeded
     "error_type": "overloaded_error", "message": "...",                # errored
     "text": "..." | "json": {...} | "echo_schema_default": True,       # succeeded: the answer text
     "stop_reason": "end_turn"}                    # default end_turn

``echo_schema_default`` answers the minimal value of the JSON schema the prompt carries (the layer's
json_instruction: "... valid under this JSON schema:" then the schema); no rule: "ok". Token counts are
those of aura.simulator.server (input = characters of system + messages // 4, output = characters // 4, at
least 1), so a batch answer and a live answer of the same request count the same.

Plan (``set_plan``, cleared by reset)::

    {"in_progress_polls": 1,   # retrieves answered in_progress before the batch ends
     "expire_after": None,     # the batch ends with only its first k requests run, the rest expired
     "create_500": 0,          # the first n creates make the batch, then answer HTTP 500 (a lost answer)
     "create_status": None}    # every create answers this HTTP status and makes nothing

``requests()`` is the request log (method, path, query, headers, body); ``creates`` counts the batches
created; ``batches`` holds them (``_requests`` their requests, ``_results`` their results).
"""
from __future__ import annotations

import itertools
import json
import re
import threading
import time
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from .answers import BATCH_LINE, message_text as _message_text, prompt_schema, schema_default

DEFAULT_PLAN = {"in_progress_polls": 1, "expire_after": None, "create_500": 0, "create_status": None}
CUSTOM_ID = re.compile(r"[a-zA-Z0-9_-]{1,64}")
PARAMS = {"model", "max_tokens", "messages", "system", "temperature", "top_p", "top_k", "stop_sequences",
          "metadata", "stream", "tools", "tool_choice", "thinking", "service_tier"}  # the Messages API's
def _stamp(t: float) -> str:
    return datetime.fromtimestamp(t, timezone.utc).isoformat().replace("+00:00", "Z")


def _error(status: int, kind: str, message: str) -> tuple[int, dict]:
    return status, {"type": "error", "error": {"type": kind, "message": message}}


class FakeAnthropicBatchServer:
    def __init__(self, host: str = "127.0.0.1", port: int = 0, responder=None, lean: bool = False) -> None:
        self.lean = lean  # True: a batch's requests are dropped once it has ended (its results stay)
        self.responder = responder  # (OpenAI-shaped body, text) -> answer, for a request no rule matches
        self.host, self.port = host, port
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None
        self.reset()

    # ---- lifecycle --------------------------------------------------------------------------------
    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> "FakeAnthropicBatchServer":
        app = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as the SDK's client expects

            def log_message(self, *args) -> None:
                pass

            def do_GET(self) -> None:
                app._serve(self, "GET")

            def do_POST(self) -> None:
                app._serve(self, "POST")

        self._httpd = ThreadingHTTPServer((self.host, self.port), Handler)
        self._httpd.daemon_threads = True
        self.port = self._httpd.server_address[1]
        threading.Thread(target=self._httpd.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> "FakeAnthropicBatchServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # ---- test API ---------------------------------------------------------------------------------
    def reset(self) -> None:
        with self._lock:
            self.batches: dict[str, dict] = {}
            self.polls: dict[str, int] = {}
            self.log: list[dict] = []
            self.rules: list[dict] = []
            self.rule_hits: list[int] = []
            self.plan = dict(DEFAULT_PLAN)
            self.creates = 0
            self._ids = itertools.count(1)
            self._msg_ids = itertools.count(1)

    def set_rules(self, rules: list[dict]) -> None:
        with self._lock:
            self.rules, self.rule_hits = [dict(r) for r in rules], [0] * len(rules)

    def set_plan(self, **plan) -> None:
        unknown = set(plan) - set(DEFAULT_PLAN)
        if unknown:
            raise ValueError(f"unknown plan keys {sorted(unknown)}")
        with self._lock:
            self.plan = {**DEFAULT_PLAN, **plan}

    def requests(self) -> list[dict]:
        with self._lock:
            return [dict(r) for r in self.log]

    def posts(self) -> list[dict]:
        """The creates sent (whatever their answer)."""
        return [r for r in self.requests() if r["method"] == "POST" and r["path"] == "/v1/messages/batches"]

    def polls_of(self, batch_id: str) -> int:
        with self._lock:
            return self.polls.get(batch_id, 0)

    def add_batch(self, n: int, created: float | None = None, ended: bool = False) -> str:
        """Another client's batch of n requests (custom_ids other-0, other-1, ...), created at `created`."""
        requests = [{"custom_id": f"other-{i}", "params": {"model": "m", "max_tokens": 1,
                                                         "messages": [{"role": "user", "content": "x"}]}}
                    for i in range(n)]
        with self._lock:
            batch = self._new(requests, created or time.time())
            if ended:
                self._end(batch)
            return batch["id"]

    # ---- HTTP -------------------------------------------------------------------------------------
    def _serve(self, handler: BaseHTTPRequestHandler, method: str) -> None:
        url = urlsplit(handler.path)
        length = int(handler.headers.get("content-length") or 0)
        raw = handler.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        headers = {k.lower(): v for k, v in handler.headers.items()}
        with self._lock:
            self.log.append({"method": method, "path": url.path, "query": url.query, "headers": headers,
                             "body": body})
            status, payload = self._route(method, url.path, url.query, headers, body, raw)
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        handler.send_response(status)
        handler.send_header("Content-Type", "application/binary" if isinstance(payload, bytes) else "application/json")
        handler.send_header("Content-Length", str(len(data)))
        handler.send_header("request-id", f"req_fake_{len(self.log)}")
        handler.end_headers()
        handler.wfile.write(data)

    def _route(self, method: str, path: str, query: str, headers: dict, body: Any, raw: bytes):
        key = headers.get("x-api-key") or headers.get("authorization", "").removeprefix("Bearer ").strip()
        if not key or not headers.get("anthropic-version"):  # the SDK sends the key one way or the other
            return _error(401, "authentication_error", "an API key (x-api-key or Authorization: Bearer) and "
                          "an anthropic-version header expected")
        parts = path.rstrip("/").split("/")  # ["", "v1", "messages", "batches", id?, "results"?]
        if parts[:4] != ["", "v1", "messages", "batches"]:
            return _error(404, "not_found_error", f"no route {method} {path}")
        rest = parts[4:]
        if method == "POST" and not rest:
            return self._create(body)
        if method == "GET" and not rest:
            return self._list(query)
        if method == "GET" and rest[0] in self.batches:
            batch = self.batches[rest[0]]
            if rest[1:] == ["results"]:
                if batch["processing_status"] != "ended":
                    return _error(400, "invalid_request_error", f"batch {batch['id']} is still processing")
                return 200, "".join(json.dumps(r) + "\n" for r in batch["_results"]).encode()
            if not rest[1:]:
                self._advance(batch)
                return 200, self._public(batch)
        return _error(404, "not_found_error", f"no batch {path}")

    # ---- batches ----------------------------------------------------------------------------------
    @staticmethod
    def _public(batch: dict) -> dict:
        return {k: v for k, v in batch.items() if not k.startswith("_")}

    def _new(self, requests: list[dict], created: float) -> dict:
        bid = f"msgbatch_fake_{next(self._ids)}"
        self.batches[bid] = batch = {
            "id": bid, "type": "message_batch", "processing_status": "in_progress",
            "request_counts": {"processing": len(requests), "succeeded": 0, "errored": 0, "canceled": 0, "expired": 0},
            "ended_at": None, "created_at": _stamp(created), "expires_at": _stamp(created + 86400),
            "archived_at": None, "cancel_initiated_at": None, "results_url": None,
            "_requests": requests, "_results": []}
        self.polls[bid] = 0
        return batch

    def _check(self, body: Any) -> str | None:
        if not isinstance(body, dict) or not isinstance(body.get("requests"), list):
            return "requests: a list expected"
        if set(body) != {"requests"}:
            return f"unknown fields {sorted(set(body) - {'requests'})}"
        reqs = body["requests"]
        if not 1 <= len(reqs) <= 100_000:
            return "requests: 1 to 100000 items"
        ids = [r.get("custom_id") if isinstance(r, dict) else None for r in reqs]
        bad = [i for i in ids if not isinstance(i, str) or not CUSTOM_ID.fullmatch(i)]
        if bad:
            return f"custom_id {bad[0]!r} does not match ^[a-zA-Z0-9_-]{{1,64}}$"
        if len(set(ids)) != len(ids):
            return "custom_id values must be unique within a batch"
        for r in reqs:
            p = r.get("params")
            if set(r) != {"custom_id", "params"} or not isinstance(p, dict):
                return f"{r['custom_id']}: {{custom_id, params}} expected"
            if set(p) - PARAMS:
                return f"{r['custom_id']}: params: unknown fields {sorted(set(p) - PARAMS)}"
            if not isinstance(p.get("model"), str) or not isinstance(p.get("max_tokens"), int) or p["max_tokens"] < 1:
                return f"{r['custom_id']}: params: model and max_tokens >= 1 required"
            msgs = p.get("messages")
            if not isinstance(msgs, list) or not msgs or any(
                    not isinstance(m, dict) or m.get("role") not in ("user", "assistant") for m in msgs):
                return f"{r['custom_id']}: params.messages: a non-empty list of user and assistant turns expected"
            if "system" in p and not isinstance(p["system"], (str, list)):
                return f"{r['custom_id']}: params.system: a string or a list of text blocks expected"
        return None

    def _create(self, body: Any):
        if self.plan["create_status"]:
            return _error(int(self.plan["create_status"]), "permission_error", "batches: refused by the test plan")
        why = self._check(body)
        if why:
            return _error(400, "invalid_request_error", why)
        batch = self._new(body["requests"], time.time())
        self.creates += 1
        if self.plan["create_500"] > 0:
            self.plan["create_500"] -= 1
            return _error(500, "api_error", "upstream timeout (the batch was created)")
        return 200, self._public(batch)

    def _list(self, query: str):
        args = {k: v[-1] for k, v in parse_qs(query).items()}
        data = list(self.batches.values())[::-1]  # newest first
        ids = [b["id"] for b in data]
        if args.get("after_id") in self.batches:  # the next page (the SDK's paging; before_id is not faked)
            data = data[ids.index(args["after_id"]) + 1:]
        limit = int(args.get("limit", 20))
        page = data[:limit]
        return 200, {"data": [self._public(b) for b in page], "has_more": len(data) > limit,
                     "first_id": page[0]["id"] if page else None, "last_id": page[-1]["id"] if page else None}

    def _advance(self, batch: dict) -> None:
        if batch["processing_status"] == "ended":
            return
        self.polls[batch["id"]] += 1
        if self.polls[batch["id"]] > int(self.plan["in_progress_polls"]):
            self._end(batch)

    def _end(self, batch: dict) -> None:
        """Run every request by the rules; the batch ends with its results."""
        limit = self.plan["expire_after"]
        counts = {"processing": 0, "succeeded": 0, "errored": 0, "canceled": 0, "expired": 0}
        results = []
        for i, req in enumerate(batch["_requests"]):
            result = {"type": "expired"} if limit is not None and i >= int(limit) else self._result(req)
            counts[result["type"]] += 1
            results.append({"custom_id": req["custom_id"], "result": result})
        batch.update(processing_status="ended", request_counts=counts, ended_at=_stamp(time.time()),
                     results_url=f"{self.base_url}/v1/messages/batches/{batch['id']}/results", _results=results)
        if self.lean:
            batch["_requests"] = []

    def _pick(self, req: dict, text: str) -> dict:
        for i, rule in enumerate(self.rules):
            match = rule.get("match") or {}
            if "contains" in match and str(match["contains"]) not in text:
                continue
            if "custom_id" in match and match["custom_id"] != req["custom_id"]:
                continue
            if "model" in match and match["model"] != req["params"].get("model"):
                continue
            if rule.get("times") is not None and self.rule_hits[i] >= int(rule["times"]):
                continue
            self.rule_hits[i] += 1
            return rule
        if self.responder is None:
            return {}
        # the responder (aura.simulator.plant) reads an OpenAI-shaped chat body: the system prompt as its first message
        system = req["params"].get("system")
        if isinstance(system, list):
            system = "".join(b.get("text", "") for b in system if isinstance(b, dict))
        body = {"model": req["params"].get("model"),
                "messages": ([{"role": "system", "content": system}] if system else []) + req["params"]["messages"]}
        token = BATCH_LINE.set(req["custom_id"])
        try:
            answer = self.responder(body, text)
        finally:
            BATCH_LINE.reset(token)
        return {"json": answer["json"]} if "json" in answer else {"text": str(answer.get("content") or "")}

    def _result(self, req: dict) -> dict:
        p = req["params"]
        system = p.get("system")
        if isinstance(system, list):
            system = "".join(b.get("text", "") for b in system if isinstance(b, dict))
        text = _message_text(([{"content": system}] if system else []) + p["messages"])
        rule = self._pick(req, text)
        kind = rule.get("result", "succeeded")
        if kind == "errored":
            return {"type": "errored", "error": {"type": "error", "error": {
                "type": rule.get("error_type", "api_error"), "message": rule.get("message", "fake error")}}}
        if kind in ("expired", "canceled"):
            return {"type": kind}
        if "json" in rule:
            content = json.dumps(rule["json"])
        elif rule.get("echo_schema_default"):
            content = json.dumps(schema_default(prompt_schema(text)))
        else:
            content = str(rule.get("text", "ok"))
        n = next(self._msg_ids)
        return {"type": "succeeded", "message": {
            "id": f"msg_fake_{n}", "type": "message", "role": "assistant", "model": p["model"],
            "content": [{"type": "text", "text": content}], "stop_reason": rule.get("stop_reason", "end_turn"),
            "stop_sequence": None,
            "usage": {"input_tokens": len(text) // 4, "output_tokens": max(1, len(content) // 4),
                      "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}}}


if __name__ == "__main__":  # python -m aura.simulator.batch_anthropic: serve until Ctrl-C
    with FakeAnthropicBatchServer() as srv:
        print(f"PORT {srv.port}", flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass
