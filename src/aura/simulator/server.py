"""A small, fast, OpenAI-compatible HTTP server for tests and benchmarks.

Real HTTP on 127.0.0.1, built only on the standard library
(``asyncio.start_server`` plus a minimal HTTP/1.1 parser with keep-alive),
so the official ``openai`` client can talk to it unmodified.

Endpoints
---------
``POST /v1/chat/completions``  answer chosen by the rule list (default ``"ok"``); a message's
                               content may be a list of parts (text, image_url): logged as sent,
                               its text parts matched by ``contains``
``POST /v1/images/generations`` ``n`` small PNGs (16x16, one colour from sha256(prompt, index):
                               deterministic per prompt) as ``b64_json``; the same rules apply
                               (``contains`` matches the prompt; status/hang/malformed_body/
                               empty_choices = no images)
``POST /v1/images/edits``      the same, from a multipart form (openai ``images.edit``): its text fields
                               are logged as ``body``, each uploaded file as ``uploads[field]`` =
                               ``{filename, content_type, size, sha256}``; the PNGs are
                               ``fake_edit_png(prompt, uploaded image bytes, index)``
``GET  /v1/models``            ``{"object": "list", "data": [{"id": "fake-model", ...}]}``
``/v1/files``, ``/v1/batches``  the Files and Batch API: upload, content, create, retrieve, list; lines
                               answered by the same rules; plan (polls, expiry): batch_openai.py
``POST /_control/batch``       body ``{"in_progress_polls": n, "expire_after": k}`` sets the batch plan
``POST /_control/rules``       body ``{"rules": [...]}`` replaces the rule list
``POST /_control/reset``       clears rules, counters and the request log (the profile stays)
``POST /_control/profile``     body ``{"profile": name}``: behave as that provider (profiles.py: refusals,
                               ignored and clamped params, reasoning tokens; ``ideal`` = today's behaviour);
                               ``GET`` says which. ``FakeOpenAIServer(profile=...)``, ``srv.set_profile(name)``
``GET  /_control/requests``    ``{"count": N, "requests": [{"path", "headers", "body"}, ...]}``
``GET  /_control/stats``       ``{"count": N, "max_in_flight": M, "in_flight": K}``

Rules (first matching, non-exhausted rule wins)::

    {"match": {"model": "m", "contains": "text", "response_format_type": "json_schema",
               "response_format_contains": '"Unsafe"',   # substring of the JSON response_format
               "sample": [0.0, 0.2]},  # fault injection: the request's draw u in [lo, hi)
     "times": 2,                # only the first 2 matching requests
     "delay": 0.05,             # seconds, asyncio.sleep before answering
     # one outcome:
     "content": "text" | "json": <any> | "echo_schema_default": True
     | "status": 429, "retry_after": 1, "message": "..", "code": "..",
       "echo_auth": True        # the message ends with the request's Authorization header, as some servers'
                                # 401s quote the key they were given
     | "hang": True | "truncated": "text"
     | "malformed_body": True | "empty_choices": True
     | "tool_calls": [{"name": "read_file", "arguments": {"path": "a"}}],  # + optional "content";
                                # arguments a dict (sent as JSON text) or a string sent as is
     "finish_reason": "stop",   # optional override for content/json (tool_calls: "tool_calls")
     "cached_tokens": 100,      # optional: usage.prompt_tokens_details.cached_tokens (capped at prompt_tokens)
     "reasoning_tokens": 400}   # optional: usage.completion_tokens_details.reasoning_tokens = 400, and
                                # completion_tokens (and total_tokens) include them, as OpenAI counts them

Each logged chat request carries the ``tools`` it was sent (``None`` when it offered none).

``sample``: u = sha256(request body, how many times this same body was seen before) mapped to
[0, 1): deterministic whatever the concurrency, and a retry of the same request draws afresh.

Python API::

    with FakeOpenAIServer(rules=[...], mode="thread") as srv:   # or mode="process"
        client = openai.OpenAI(base_url=srv.base_url, api_key="x")
        srv.set_rules([...]); srv.reset(); srv.requests(); srv.stats()

Command line::

    python -m aura.simulator.server --port 8123 [--rules-json '[...]']

prints ``PORT <n>`` on stdout once it is listening.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import collections
import email.parser
import email.policy
import hashlib
import itertools
import json
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import zlib
from typing import Any

from . import profiles as fake_profiles
from .answers import message_text as _message_text, schema_default  # noqa: F401 (re-exported)
from .batch_openai import BatchStore

__all__ = ["FakeOpenAIServer", "FakeOpenAIApp", "schema_default", "fake_png"]

DEFAULT_CONTENT = "ok"
HANG_SECONDS = 3600.0
MAX_LOG = 10_000
MAX_HEADER_BYTES = 1 << 20
MAX_BODY_BYTES = 1 << 30

_REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    408: "Request Timeout",
    409: "Conflict",
    413: "Payload Too Large",
    422: "Unprocessable Entity",
    429: "Too Many Requests",
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
    504: "Gateway Timeout",
}


# --------------------------------------------------------------------------- #
# Application state and request handling
# --------------------------------------------------------------------------- #
def fake_png(prompt: str, index: int = 0, side: int = 16) -> bytes:
    """A valid side x side RGB PNG of one colour, the first 3 bytes of sha256(f"{prompt}\0{index}")."""
    rgb = hashlib.sha256(f"{prompt}\0{index}".encode()).digest()[:3]
    raw = b"".join(b"\x00" + rgb * side for _ in range(side))  # filter byte 0, then the row's pixels

    def chunk(tag: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data))

    header = struct.pack(">IIBBBBB", side, side, 8, 2, 0, 0, 0)  # 8-bit RGB, no interlace
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")


def fake_edit_png(prompt: str, image: bytes, index: int = 0) -> bytes:
    """What /v1/images/edits draws: fake_png of the prompt and the uploaded image's sha256, so a frame's
    bytes tell which image it was conditioned on."""
    return fake_png(f"{prompt}\0edit:{hashlib.sha256(image).hexdigest()}", index)


def _multipart(content_type: str, raw: bytes) -> tuple[dict | None, dict]:
    """A multipart/form-data body: (text fields, {field: {filename, content_type, size, sha256, data}})."""
    if not content_type.lower().startswith("multipart/form-data"):
        return None, {}
    msg = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
        b"Content-Type: " + content_type.encode() + b"\r\n\r\n" + raw)
    fields, uploads = {}, {}
    for part in msg.iter_parts():
        name = part.get_param("name", header="content-disposition")
        data = part.get_payload(decode=True) or b""
        if part.get_filename() is not None:
            uploads[name] = {"filename": part.get_filename(), "content_type": part.get_content_type(),
                             "size": len(data), "sha256": hashlib.sha256(data).hexdigest(), "data": data}
        else:
            fields[name] = data.decode("utf-8")
    if "n" in fields:
        fields["n"] = int(fields["n"])
    return fields, uploads


def _tool_calls(spec: Any, n: int) -> list[dict]:
    """A rule's scripted calls in the OpenAI shape; ids `call_<response n>_<i>`."""
    if not isinstance(spec, list) or not all(isinstance(c, dict) and isinstance(c.get("name"), str) for c in spec):
        raise ValueError("tool_calls must be a list of {name, arguments} objects")
    return [{"id": f"call_{n}_{i}", "type": "function",
             "function": {"name": c["name"],
                          "arguments": c["arguments"] if isinstance(c.get("arguments"), str)
                          else json.dumps(c.get("arguments") or {})}}
            for i, c in enumerate(spec)]


def _error_body(message: str, status: int, type_: str = "fake_error") -> dict:
    return {"error": {"message": message, "type": type_, "code": status}}


def _json_or_none(raw: bytes):
    """A request body as JSON, or None (empty or not JSON: the handler answers 400)."""
    try:
        return json.loads(raw) if raw else None
    except ValueError:
        return None


class FakeOpenAIApp:
    """Server state and the asyncio connection handler (one event loop)."""

    def __init__(self, rules: list | None = None, profile: str = "ideal", keep: int = MAX_LOG) -> None:
        self.profile = fake_profiles.check(profile)  # which provider's parameter rules chat requests meet
        self.rules: list[dict] = []
        self.rule_hits: list[int] = []
        self.log: collections.deque = collections.deque(maxlen=keep)  # the last requests, for /_fake/stats
        self.count = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self.seen: collections.Counter = collections.Counter()  # body hash -> times seen (sample draws)
        self._ids = itertools.count(1)
        self._conn_tasks: set[asyncio.Task] = set()
        self._server: asyncio.base_events.Server | None = None
        self.batch_store = BatchStore()  # /v1/files, /v1/batches
        # (body, text) -> a rule's outcome part, for a chat request no rule matched (aura.simulator.plant)
        self.responder = None
        self.set_rules(rules or [])

    # ---- state ---------------------------------------------------------- #
    def set_rules(self, rules: list) -> None:
        if not isinstance(rules, list) or not all(isinstance(r, dict) for r in rules):
            raise ValueError("rules must be a list of objects")
        self.rules = [dict(r) for r in rules]
        self.rule_hits = [0] * len(self.rules)

    def reset(self) -> None:
        self.set_rules([])
        self.log.clear()
        self.seen.clear()
        self.batch_store.reset()
        self.count = 0
        self.max_in_flight = self.in_flight

    def _draw(self, body: dict) -> float:
        digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()
        n = self.seen[digest]
        self.seen[digest] += 1
        return int(hashlib.sha256(f"{digest}:{n}".encode()).hexdigest()[:12], 16) / 16 ** 12

    def _pick_rule(self, body: dict, text: str) -> dict | None:
        model = body.get("model")
        rf = body.get("response_format")
        rf_type = rf.get("type", "none") if isinstance(rf, dict) else "none"
        u = self._draw(body) if any("sample" in (r.get("match") or {}) for r in self.rules) else None
        for i, rule in enumerate(self.rules):
            match = rule.get("match") or {}
            if "sample" in match and not float(match["sample"][0]) <= u < float(match["sample"][1]):
                continue
            if "model" in match and match["model"] != model:
                continue
            if "contains" in match and str(match["contains"]) not in text:
                continue
            if "response_format_type" in match and match["response_format_type"] != rf_type:
                continue
            if "response_format_contains" in match and str(match["response_format_contains"]) not in json.dumps(rf):
                continue
            times = rule.get("times")
            if times is not None and self.rule_hits[i] >= int(times):
                continue
            self.rule_hits[i] += 1
            return rule
        return self.responder(body, text) if self.responder is not None else None

    # ---- server lifecycle (inside the loop) ----------------------------- #
    async def start(self, host: str, port: int) -> int:
        self._server = await asyncio.start_server(
            self._handle_conn, host, port, limit=MAX_HEADER_BYTES, backlog=1024,
            reuse_address=True,
        )
        return self._server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        tasks = list(self._conn_tasks)
        for t in tasks:
            t.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        if self._server is not None:
            try:
                await asyncio.wait_for(self._server.wait_closed(), 2.0)
            except (asyncio.TimeoutError, Exception):
                pass
            self._server = None

    # ---- HTTP ------------------------------------------------------------ #
    async def _handle_conn(self, reader: asyncio.StreamReader,
                           writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._conn_tasks.add(task)
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                except asyncio.LimitOverrunError:
                    await self._send(writer, 431, _error_body("headers too large", 431), close=True)
                    return
                lines = head.decode("latin-1").split("\r\n")
                try:
                    method, target, version = lines[0].split(" ", 2)
                except ValueError:
                    await self._send(writer, 400, _error_body("bad request line", 400), close=True)
                    return
                headers: dict[str, str] = {}
                for line in lines[1:]:
                    if not line:
                        continue
                    name, _, value = line.partition(":")
                    headers[name.strip().lower()] = value.strip()
                if "chunked" in headers.get("transfer-encoding", "").lower():
                    await self._send(writer, 501, _error_body("chunked bodies unsupported", 501),
                                     close=True)
                    return
                try:
                    length = int(headers.get("content-length", "0") or 0)
                except ValueError:
                    length = -1
                if length < 0 or length > MAX_BODY_BYTES:
                    await self._send(writer, 400, _error_body("bad content-length", 400), close=True)
                    return
                raw = b""
                if length:
                    try:
                        raw = await reader.readexactly(length)
                    except (asyncio.IncompleteReadError, ConnectionError):
                        return
                conn_hdr = headers.get("connection", "").lower()
                keep_alive = (
                    "close" not in conn_hdr
                    if version.upper() != "HTTP/1.0" else "keep-alive" in conn_hdr
                )
                path, _, query = target.partition("?")
                resp = await self._dispatch(method.upper(), path, headers, raw, reader, query)
                if resp is None:  # connection dropped while hanging
                    return
                status, payload, extra, force_close = resp
                ok = await self._send(writer, status, payload, extra,
                                      close=force_close or not keep_alive)
                if not ok or force_close or not keep_alive:
                    return
        except asyncio.CancelledError:
            pass
        finally:
            if task is not None:
                self._conn_tasks.discard(task)
            try:
                writer.close()
            except Exception:
                pass

    async def _send(self, writer: asyncio.StreamWriter, status: int, payload: Any,
                    extra: dict | None = None, close: bool = False) -> bool:
        if isinstance(payload, (bytes, bytearray)):
            body = bytes(payload)
        else:
            body = json.dumps(payload, separators=(",", ":")).encode()
        head = [
            f"HTTP/1.1 {status} {_REASONS.get(status, 'Status')}",
            "Content-Type: application/json",
            f"Content-Length: {len(body)}",
            "Connection: close" if close else "Connection: keep-alive",
        ]
        if extra:
            head.extend(f"{k}: {v}" for k, v in extra.items())
        data = ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body
        if writer.is_closing():
            return False
        try:
            writer.write(data)
            await writer.drain()
        except (ConnectionError, RuntimeError):
            return False
        return True

    async def _dispatch(self, method: str, path: str, headers: dict, raw: bytes,
                        reader: asyncio.StreamReader, query: str = ""):
        if path.endswith("/chat/completions"):
            if method != "POST":
                return 405, _error_body("method not allowed", 405), None, False
            return await self._chat(path, headers, raw, reader)
        if path.endswith("/images/generations"):
            if method != "POST":
                return 405, _error_body("method not allowed", 405), None, False
            return await self._images(path, headers, raw, reader)
        if path.endswith("/images/edits"):
            if method != "POST":
                return 405, _error_body("method not allowed", 405), None, False
            return await self._images(path, headers, raw, reader, edit=True)
        if path.endswith("/models") and method == "GET":
            return 200, {"object": "list",
                         "data": [{"id": "fake-model", "object": "model",
                                   "created": 0, "owned_by": "fake"}]}, None, False
        if path.startswith(("/v1/files", "/v1/batches")):
            self.log.append({"path": path, "method": method, "headers": headers,
                             "body": None if path.startswith("/v1/files") else json.loads(raw or b"null")})
            refused = fake_profiles.batch_refusal(self.profile, path)  # a provider without a Batch API: 404
            if refused is not None:
                return (*refused, None, False)
            status, payload = self.batch_store.handle(self, method, path, headers, raw, query)
            return status, payload, None, False
        if path.startswith("/_control/"):
            return self._control(method, path[len("/_control/"):], raw)
        return 404, _error_body(f"unknown path {path}", 404, "not_found"), None, False

    def _control(self, method: str, name: str, raw: bytes):
        if name == "rules" and method == "POST":
            try:
                data = json.loads(raw or b"{}")
                rules = data.get("rules", []) if isinstance(data, dict) else data
                self.set_rules(rules)
            except (ValueError, AttributeError) as exc:
                return 400, _error_body(f"bad rules: {exc}", 400), None, False
            return 200, {"ok": True, "rules": len(self.rules)}, None, False
        if name == "batch" and method == "POST":
            try:
                self.batch_store.set_plan(json.loads(raw or b"{}"))
            except (ValueError, AttributeError) as exc:
                return 400, _error_body(f"bad batch plan: {exc}", 400), None, False
            return 200, {"ok": True}, None, False
        if name == "reset" and method == "POST":
            self.reset()
            return 200, {"ok": True}, None, False
        if name == "profile" and method in ("GET", "POST"):
            try:
                if method == "POST":
                    data = json.loads(raw or b"{}")
                    self.profile = fake_profiles.check(data.get("profile") if isinstance(data, dict) else data)
            except (ValueError, TypeError) as exc:
                return 400, _error_body(f"bad profile: {exc}", 400), None, False
            return 200, {"ok": True, "profile": self.profile}, None, False
        if name == "requests" and method == "GET":
            return 200, {"count": self.count, "requests": list(self.log)}, None, False
        if name == "stats" and method == "GET":
            return 200, {"count": self.count, "max_in_flight": self.max_in_flight,
                         "in_flight": self.in_flight}, None, False
        return 404, _error_body(f"unknown control {method} {name}", 404, "not_found"), None, False

    async def _chat(self, path: str, headers: dict, raw: bytes, reader: asyncio.StreamReader):
        body = _json_or_none(raw)
        self.count += 1
        self.log.append({"path": path, "headers": headers, "body": body,
                         "tools": body.get("tools") if isinstance(body, dict) else None})
        if not isinstance(body, dict):
            return 400, _error_body("request body must be a JSON object", 400,
                                    "invalid_request_error"), None, False
        # the provider profile, before the rules: a refusal, or the body it uses (logged above as sent)
        verdict = fake_profiles.apply(self.profile, body)
        if verdict.refusal is not None:
            return (*verdict.refusal, None, False)
        body = verdict.body
        self.in_flight += 1
        if self.in_flight > self.max_in_flight:
            self.max_in_flight = self.in_flight
        try:
            messages = body.get("messages")
            text = _message_text(messages)
            rule = self._pick_rule(body, text) or {}
            if rule.get("echo_auth"):
                rule = {**rule, "message": f"{rule.get('message') or 'Incorrect API key provided'}: "
                                           f"{headers.get('authorization')}"}
            delay = rule.get("delay")
            if delay:
                await asyncio.sleep(float(delay))
            if rule.get("hang"):
                await self._hang(reader)
                return None
            return fake_profiles.finish(verdict, rule, self._outcome(rule, body, text))  # + reasoning tokens
        finally:
            self.in_flight -= 1

    async def _images(self, path: str, headers: dict, raw: bytes, reader: asyncio.StreamReader, edit: bool = False):
        uploads: dict = {}
        if edit:
            body, uploads = _multipart(headers.get("content-type", ""), raw)
        else:
            body = _json_or_none(raw)
        self.count += 1
        self.log.append({"path": path, "headers": headers, "body": body,
                         **({"uploads": {k: {f: v for f, v in u.items() if f != "data"} for k, u in uploads.items()}}
                            if edit else {})})
        if edit and "image" not in uploads and "image[]" not in uploads:
            return 400, _error_body("images.edit needs an uploaded image", 400, "invalid_request_error"), None, False
        if not isinstance(body, dict) or not isinstance(body.get("prompt"), str):
            return 400, _error_body("request body must be a JSON object with a prompt", 400,
                                    "invalid_request_error"), None, False
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            prompt = body["prompt"]
            rule = self._pick_rule(body, prompt) or {}
            if rule.get("delay"):
                await asyncio.sleep(float(rule["delay"]))
            if rule.get("hang"):
                await self._hang(reader)
                return None
            if rule.get("status") is not None or rule.get("malformed_body"):
                return self._outcome(rule, body, prompt)
            n = int(body.get("n") or 1)
            source = (uploads.get("image") or uploads.get("image[]") or {}).get("data")
            draw = (lambda i: fake_edit_png(prompt, source, i)) if edit else (lambda i: fake_png(prompt, i))
            data = [] if rule.get("empty_choices") else [
                {"b64_json": base64.b64encode(draw(i)).decode("ascii")} for i in range(n)]
            return 200, {"created": int(time.time()), "data": data}, None, False
        finally:
            self.in_flight -= 1

    @staticmethod
    async def _hang(reader: asyncio.StreamReader) -> None:
        """Sleep "forever", returning early when the client closes the socket."""
        eof = asyncio.ensure_future(reader.read(1))
        sleeper = asyncio.ensure_future(asyncio.sleep(HANG_SECONDS))
        try:
            await asyncio.wait({eof, sleeper}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for t in (eof, sleeper):
                if not t.done():
                    t.cancel()
            await asyncio.gather(eof, sleeper, return_exceptions=True)

    def _outcome(self, rule: dict, body: dict, text: str):
        status = rule.get("status")
        if status is not None:
            status = int(status)
            extra = None
            if rule.get("retry_after") is not None:
                ra = rule["retry_after"]
                if isinstance(ra, float) and ra.is_integer():
                    ra = int(ra)
                extra = {"Retry-After": str(ra)}
            msg = rule.get("message") or f"fake error {status}"
            err = _error_body(msg, status)
            if rule.get("code") is not None:  # e.g. "context_length_exceeded"
                err["error"]["code"] = rule["code"]
            return status, err, extra, False
        if rule.get("malformed_body"):
            return 200, b'{"id": "x", "choi', None, False
        if rule.get("empty_choices"):
            return 200, {"id": "chatcmpl-empty", "object": "chat.completion", "created": int(time.time()),
                         "model": body.get("model") or "fake-model", "choices": [],
                         "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}}, None, False

        finish = rule.get("finish_reason", "stop")
        if "truncated" in rule:
            content = str(rule["truncated"])
            finish = "length"
        elif "json" in rule:
            content = json.dumps(rule["json"])
        elif rule.get("echo_schema_default"):
            content = json.dumps(schema_default(self._request_schema(body)))
        elif "content" in rule:
            content = rule["content"]
            if not isinstance(content, str):
                content = json.dumps(content)
        else:
            content = DEFAULT_CONTENT
        prompt_tokens = len(text) // 4
        completion_tokens = max(1, len(content) // 4)
        n = next(self._ids)
        message: dict = {"role": "assistant", "content": content}
        if "tool_calls" in rule:
            message = {"role": "assistant", "content": rule.get("content"),
                       "tool_calls": _tool_calls(rule["tool_calls"], n)}
            finish = rule.get("finish_reason", "tool_calls")
            completion_tokens = max(1, (len(message["content"] or "") + sum(
                len(c["function"]["name"]) + len(c["function"]["arguments"]) for c in message["tool_calls"])) // 4)
        return 200, {
            "id": f"chatcmpl-fake-{n}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model") or "fake-model",
            "choices": [{
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": finish,
            }],
            "usage": {
                "prompt_tokens": prompt_tokens,
                # reasoning tokens are inside completion_tokens (OpenAI's convention), itemised below
                "completion_tokens": completion_tokens + int(rule.get("reasoning_tokens") or 0),
                "total_tokens": prompt_tokens + completion_tokens + int(rule.get("reasoning_tokens") or 0),
                **({"prompt_tokens_details": {"cached_tokens": min(int(rule["cached_tokens"]), prompt_tokens)}}
                   if "cached_tokens" in rule else {}),
                **({"completion_tokens_details": {"reasoning_tokens": int(rule["reasoning_tokens"])}}
                   if "reasoning_tokens" in rule else {}),
            },
        }, None, False

    @staticmethod
    def _request_schema(body: dict) -> Any:
        rf = body.get("response_format")
        if not isinstance(rf, dict):
            return {}
        if rf.get("type") == "json_schema":
            js = rf.get("json_schema")
            if isinstance(js, dict):
                return js.get("schema", {})
            return {}
        return rf.get("schema", {})


# --------------------------------------------------------------------------- #
# Public wrapper
# --------------------------------------------------------------------------- #
_NO_PROXY_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class FakeOpenAIServer:
    """Run a :class:`FakeOpenAIApp` in a daemon thread or in a child process."""

    def __init__(self, rules: list | None = None, host: str = "127.0.0.1", port: int = 0,
                 mode: str = "thread", profile: str = "ideal", responder=None, keep: int = MAX_LOG,
                 lean: bool = False) -> None:
        if mode not in ("thread", "process"):
            raise ValueError("mode must be 'thread' or 'process'")
        if responder is not None and mode != "thread":
            raise ValueError("a responder (a Python callable) needs mode='thread'")
        self.responder = responder  # FakeOpenAIApp.responder: answers what no rule matches
        self.initial_rules = list(rules or [])
        self.keep = keep  # requests the app keeps for stats (a long run against a responder keeps few)
        self.lean = lean  # True: a batch's input file is dropped once the batch has run
        self.profile = fake_profiles.check(profile)  # set on the app once it listens (start)
        self.host = host
        self.port = port
        self.mode = mode
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._app: FakeOpenAIApp | None = None
        self._proc: subprocess.Popen | None = None
        self._started = False

    # ---- urls ----------------------------------------------------------- #
    @property
    def root_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def base_url(self) -> str:
        return f"{self.root_url}/v1"

    # ---- lifecycle ------------------------------------------------------ #
    def start(self) -> "FakeOpenAIServer":
        if self._started:
            return self
        if self.mode == "thread":
            self._start_thread()
        else:
            self._start_process()
        self._wait_accepting()
        self._started = True
        if self.profile != "ideal":
            self.set_profile(self.profile)
        return self

    def _start_thread(self) -> None:
        ready = threading.Event()
        box: dict[str, Any] = {}

        def runner() -> None:
            loop = asyncio.new_event_loop()
            asyncio.set_event_loop(loop)
            self._loop = loop
            app = FakeOpenAIApp(self.initial_rules, keep=self.keep)
            app.batch_store.forget_inputs = self.lean
            app.responder = self.responder
            self._app = app
            try:
                box["port"] = loop.run_until_complete(app.start(self.host, self.port))
            except BaseException as exc:  # pragma: no cover - reported to caller
                box["error"] = exc
                ready.set()
                loop.close()
                return
            ready.set()
            try:
                loop.run_forever()
            finally:
                try:
                    loop.run_until_complete(app.close())
                    loop.run_until_complete(loop.shutdown_asyncgens())
                finally:
                    loop.close()

        self._thread = threading.Thread(target=runner, name="fake-openai", daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError("fake OpenAI server thread did not start")
        if "error" in box:
            raise box["error"]
        self.port = box["port"]

    def _start_process(self) -> None:
        cmd = [sys.executable, "-m", "aura.simulator.server", "--host", self.host, "--port", str(self.port),
               "--rules-json", json.dumps(self.initial_rules)]
        self._proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL,
                                      text=True, bufsize=1)
        assert self._proc.stdout is not None
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            line = self._proc.stdout.readline()
            if not line:
                break
            if line.startswith("PORT "):
                self.port = int(line.split()[1])
                return
        rc = self._proc.poll()
        self._kill_proc()
        raise RuntimeError(f"fake OpenAI server process did not start (rc={rc})")

    def _wait_accepting(self, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                with socket.create_connection((self.host, self.port), timeout=1):
                    return
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.01)

    def stop(self) -> None:
        if self.mode == "thread":
            loop, thread = self._loop, self._thread
            if loop is not None and thread is not None and thread.is_alive():
                try:
                    loop.call_soon_threadsafe(loop.stop)
                except RuntimeError:
                    pass
                thread.join(10)
            self._thread = None
            self._loop = None
        else:
            self._kill_proc()
        self._started = False

    def _kill_proc(self) -> None:
        proc = self._proc
        if proc is None:
            return
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
        if proc.stdout is not None:
            proc.stdout.close()
        self._proc = None

    def __enter__(self) -> "FakeOpenAIServer":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def __del__(self) -> None:  # best effort for forgotten process-mode servers
        try:
            if self._proc is not None:
                self._kill_proc()
        except Exception:
            pass

    # ---- control -------------------------------------------------------- #
    def _control(self, method: str, name: str, payload: Any = None) -> Any:
        data = None if payload is None else json.dumps(payload).encode()
        req = urllib.request.Request(
            f"{self.root_url}/_control/{name}", data=data, method=method,
            headers={"Content-Type": "application/json"},
        )
        with _NO_PROXY_OPENER.open(req, timeout=30) as resp:
            return json.loads(resp.read())

    def set_rules(self, rules: list) -> None:
        self._control("POST", "rules", {"rules": list(rules)})

    def reset(self) -> None:
        self._control("POST", "reset", {})

    def set_profile(self, profile: str) -> None:
        """Behave as that provider from now on (fake_profiles.PROFILES; "ideal" = every parameter taken)."""
        self.profile = fake_profiles.check(profile)
        if self._started:
            self._control("POST", "profile", {"profile": profile})

    def set_batch_plan(self, **plan) -> None:
        """in_progress_polls=n, expire_after=k, create_500=n, upload_status=s (batch_openai.py)."""
        self._control("POST", "batch", plan)

    def requests(self) -> list[dict]:
        return self._control("GET", "requests")["requests"]

    def request_count(self) -> int:
        return self._control("GET", "requests")["count"]

    def stats(self) -> dict:
        return self._control("GET", "stats")


# --------------------------------------------------------------------------- #
# Command line
# --------------------------------------------------------------------------- #
async def _serve(host: str, port: int, rules: list) -> None:
    app = FakeOpenAIApp(rules)
    bound = await app.start(host, port)
    print(f"PORT {bound}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        try:
            loop.add_signal_handler(sig, stop.set)
        except (NotImplementedError, RuntimeError):  # pragma: no cover - non-POSIX
            pass
    try:
        await stop.wait()
    finally:
        await app.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Fake OpenAI-compatible server")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8123)
    parser.add_argument("--rules-json", default="[]",
                        help="JSON list of rules (or {\"rules\": [...]})")
    args = parser.parse_args(argv)
    rules = json.loads(args.rules_json)
    if isinstance(rules, dict):
        rules = rules.get("rules", [])
    asyncio.run(_serve(args.host, args.port, rules))


if __name__ == "__main__":
    main()
