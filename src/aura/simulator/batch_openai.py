"""The fake server's Files and Batch API (``aura.simulator.server`` routes ``/v1/files`` and ``/v1/batches`` here).

``POST /v1/files`` (multipart: purpose, file)    stores the file; ``GET /v1/files/{id}`` its object;
``GET /v1/files/{id}/content`` its bytes.
``POST /v1/batches`` {input_file_id, endpoint, completion_window, metadata} creates a batch
(``validating``); ``GET /v1/batches/{id}`` retrieves it, each retrieve moving it one step on:
validating -> in_progress (``in_progress_polls`` retrieves) -> completed, or expired when the plan
says so. ``GET /v1/batches?limit=&after=`` lists them newest first, a page at a time (``has_more``).

The lines are answered when the batch ends, each through the server's provider profile (its refusals, and
the usage it reports: reasoning tokens) and rule list exactly as a live
``/v1/chat/completions`` call with that body would be (so a rule with ``status`` fails that line: it
goes to the error file with its status code and error body). A line's answer is not logged as an
HTTP request.

Plan (``POST /_control/batch`` {...}, cleared by reset)::

    {"in_progress_polls": 2,   # retrieves answered "in_progress" before the batch ends
     "expire_after": 3,         # the batch expires with only its first 3 lines answered; the
                                # rest are error lines with code "batch_expired"
     "create_500": 1}           # the first 1 batch creations create the batch, then answer HTTP 500
                                # (a response lost after the server acted: a client retry would
                                # create a second batch)
     "upload_status": 401}      # every file upload answers this HTTP status (an error body), uploads nothing
"""
from __future__ import annotations

import email.parser
import email.policy
import itertools
import json
import time
from typing import Any
from urllib.parse import parse_qs

from . import profiles as fake_profiles
from .answers import BATCH_LINE, message_text as _message_text  # the live path's own helper

DEFAULT_PLAN = {"in_progress_polls": 1, "expire_after": None, "create_500": 0, "upload_status": None}


class BatchStore:
    def __init__(self) -> None:
        self.reset()

    forget_inputs = False  # True: an input file's content is dropped once its batch has run (a long rehearsal)

    def reset(self) -> None:
        self.files: dict[str, dict] = {}
        self.batches: dict[str, dict] = {}
        self.polls: dict[str, int] = {}
        self.plan = dict(DEFAULT_PLAN)
        self._ids = itertools.count(1)

    def set_plan(self, plan: dict) -> None:
        unknown = set(plan) - set(DEFAULT_PLAN)
        if unknown:
            raise ValueError(f"unknown batch plan keys {sorted(unknown)}")
        self.plan = {**DEFAULT_PLAN, **plan}

    # files ------------------------------------------------------------------------------------
    def _file(self, content: bytes, filename: str, purpose: str) -> dict:
        fid = f"file-fake-{next(self._ids)}"
        self.files[fid] = {"id": fid, "object": "file", "bytes": len(content), "created_at": int(time.time()),
                           "filename": filename, "purpose": purpose, "status": "processed", "_content": content}
        return self.files[fid]

    @staticmethod
    def _public(obj: dict) -> dict:
        return {k: v for k, v in obj.items() if not k.startswith("_")}

    def _upload(self, headers: dict, raw: bytes):
        if self.plan["upload_status"]:
            return self.plan["upload_status"], {"error": {"message": "files: refused by the test plan",
                                                          "code": self.plan["upload_status"]}}
        ctype = headers.get("content-type", "")
        if not ctype.startswith("multipart/form-data"):
            return 400, {"error": {"message": "files: multipart/form-data expected", "code": 400}}
        msg = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
            b"Content-Type: " + ctype.encode("latin-1") + b"\r\n\r\n" + raw)
        fields, content, filename = {}, None, "upload"
        for part in msg.iter_parts():
            name = part.get_param("name", header="content-disposition")
            if name == "file":
                content, filename = part.get_payload(decode=True), part.get_filename() or filename
            elif name:
                fields[name] = part.get_payload(decode=True).decode()
        if content is None or fields.get("purpose") != "batch":
            return 400, {"error": {"message": "files: a file with purpose batch expected", "code": 400}}
        return 200, self._public(self._file(content, filename, "batch"))

    # batches ----------------------------------------------------------------------------------
    def _create(self, body: Any):
        if not isinstance(body, dict) or body.get("input_file_id") not in self.files:
            return 400, {"error": {"message": "batches: unknown input_file_id", "code": 400}}
        bid = f"batch_fake_{next(self._ids)}"
        self.batches[bid] = {
            "id": bid, "object": "batch", "endpoint": body.get("endpoint"), "errors": None,
            "input_file_id": body["input_file_id"], "completion_window": body.get("completion_window", "24h"),
            "status": "validating", "output_file_id": None, "error_file_id": None,
            "created_at": int(time.time()), "metadata": body.get("metadata"),
            "request_counts": {"total": 0, "completed": 0, "failed": 0},
        }
        self.polls[bid] = 0
        if self.plan["create_500"] > 0:
            self.plan["create_500"] -= 1
            return 500, {"error": {"message": "upstream timeout (the batch was created)", "code": 500}}
        return 200, self.batches[bid]

    def _advance(self, app, batch: dict) -> None:
        if batch["status"] not in ("validating", "in_progress"):
            return
        self.polls[batch["id"]] += 1
        if batch["status"] == "validating":
            batch["status"] = "in_progress"
        elif self.polls[batch["id"]] > int(self.plan["in_progress_polls"]):
            self._run(app, batch)

    def _run(self, app, batch: dict) -> None:
        """Answer every line through the rule list; end completed (or expired, by the plan)."""
        lines = [json.loads(x) for x in self.files[batch["input_file_id"]]["_content"].decode().splitlines() if x.strip()]
        limit = self.plan["expire_after"]
        out, err = [], []
        for i, line in enumerate(lines):
            cid = line.get("custom_id")
            if limit is not None and i >= int(limit):
                err.append({"id": f"batch_req_{i}", "custom_id": cid, "response": None,
                            "error": {"code": "batch_expired", "message": "This request could not be executed "
                                      "before the completion window expired."}})
                continue
            body = line.get("body") or {}
            verdict = fake_profiles.apply(app.profile, body)  # a line meets the provider's rules as a live call does
            if verdict.refusal is not None:
                status, payload = verdict.refusal
            else:
                body = verdict.body
                text = _message_text(body.get("messages"))
                token = BATCH_LINE.set(cid)
                try:
                    rule = app._pick_rule(body, text) or {}
                    status, payload, _, _ = fake_profiles.finish(verdict, rule, app._outcome(rule, body, text))
                finally:
                    BATCH_LINE.reset(token)
            row = {"id": f"batch_req_{i}", "custom_id": cid,
                   "response": {"status_code": status, "request_id": f"req_{i}", "body": payload}, "error": None}
            (out if status == 200 else err).append(row)
        for kind, rows in (("output_file_id", out), ("error_file_id", err)):
            if rows:
                data = "".join(json.dumps(r) + "\n" for r in rows).encode()
                batch[kind] = self._file(data, f"{batch['id']}_{kind}.jsonl", "batch_output")["id"]
        if self.forget_inputs:
            self.files[batch["input_file_id"]]["_content"] = b""
        batch["status"] = "expired" if limit is not None and len(lines) > int(limit) else "completed"
        batch["request_counts"] = {"total": len(lines), "completed": len(out),
                                   "failed": sum(1 for r in err if r["error"] is None)}

    # routing ----------------------------------------------------------------------------------
    def handle(self, app, method: str, path: str, headers: dict, raw: bytes, query: str = ""):
        """(status, payload) of a /v1/files or /v1/batches request."""
        parts = path.rstrip("/").split("/")  # ["", "v1", "files", id?, "content"?]
        kind, rest = parts[2], parts[3:]
        if kind == "files":
            if method == "POST" and not rest:
                return self._upload(headers, raw)
            if method == "GET" and rest and rest[0] in self.files:
                f = self.files[rest[0]]
                return (200, f["_content"]) if rest[1:] == ["content"] else (200, self._public(f))
            return 404, {"error": {"message": f"no file {path}", "code": 404}}
        if method == "POST" and not rest:
            try:
                body = json.loads(raw or b"null")
            except ValueError:
                body = None
            return self._create(body)
        if method == "GET" and not rest:
            args = {k: v[-1] for k, v in parse_qs(query).items()}
            data = list(self.batches.values())[::-1]  # newest first
            if args.get("after") in self.batches:
                data = data[[b["id"] for b in data].index(args["after"]) + 1:]
            limit = int(args.get("limit", 20))
            page = data[:limit]
            return 200, {"object": "list", "data": page, "has_more": len(data) > limit,
                         "first_id": page[0]["id"] if page else None, "last_id": page[-1]["id"] if page else None}
        if method == "GET" and rest and rest[0] in self.batches:
            self._advance(app, self.batches[rest[0]])
            return 200, self.batches[rest[0]]
        return 404, {"error": {"message": f"no batch {path}", "code": 404}}
