"""`python -m aura preflight --configfile F`: a few real calls before a paid run, one per thing it relies on.

For every model the run would call on a remote endpoint (the models of `aura estimate`'s lines), one short
call per capability its stages use, each sent exactly as the run sends it (the model's params, the endpoint's
structured-output style, through :meth:`LLMClient.prepare`), never from the cache:

* ``chat``: one plain question;
* ``structured``: a one-field JSON schema, when the endpoint takes structured output; the answer must parse;
* ``tools``: one offered function, when the model serves a role whose calls offer tools (a family's
  ``tool_roles``); with ``serving.tool_call_parser`` (vLLM) sent with tool_choice auto, as an agent sends it:
  the answer must carry structured ``tool_calls`` (else the line names the parser the server lacks);
* ``reasoning``: with ``serving.reasoning_parser`` (vLLM: DeepSeek-R1, Qwen3 thinking), the structured question:
  the reasoning must arrive separated (``reasoning_content``, or ``reasoning`` as vLLM 0.11+ names it), content
  must hold no ``<think>`` block and must parse (else the line names the model and the missing parser);
* ``images``: one small PNG, when the model has ``vision: true``;
* ``batch``: the endpoint's batch listing (no request is created, nothing is billed), when it has ``batch``.

One line each, ``ok`` or what the server said, then the preflight's own cost. ``--calibrate K`` then sends K
real requests of every stage and model whose inputs exist (:func:`calibrate`), and `aura estimate` prices
those lines from the tokens they used. The result goes to
``<paths.logs>/preflight/<config hash>.json``; with ``llm.require_preflight: true`` the LLM layer sends no
call to a remote endpoint until a preflight of the same config (same hash) has passed. Local (embedded)
endpoints are free and offline: not checked. Exit status 0 when every check passed, 1 otherwise.
"""
from __future__ import annotations

import argparse
import io
import json
import os
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from .config import Config, ConfigError, load_config
from .llm.preflight_gate import record_path  # the gate (llm.require_preflight) lies in the LLM layer

SCHEMA = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"],
          "additionalProperties": False}
TOOL = {"type": "function", "function": {"name": "get_time", "description": "The current time.",
                                         "parameters": {"type": "object", "properties": {}}}}
QUESTION = "This is a connectivity check. Reply with the single word: ok."


@dataclass
class Check:
    endpoint: str
    model: str
    capability: str
    ok: bool
    message: str
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float = 0.0

    def line(self) -> str:
        return (f"{'ok  ' if self.ok else 'FAIL'} {self.endpoint:<10} {self.model:<22} {self.capability:<10} "
                f"{self.message}")


def _png() -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (32, 32), (200, 40, 40)).save(buf, "PNG")
    return buf.getvalue()


def plan(config: Config) -> list[tuple[str, list[str]]]:
    """(model, capabilities) for every remote model the run calls, in the estimate's order."""
    from .estimate import family_lines
    from .families import tool_roles

    tools = tool_roles(config.raw)
    seen: dict[str, set[str]] = {}
    for line in family_lines(config):
        if line.role is None or line.model not in config.models:
            continue
        seen.setdefault(line.model, set()).add(line.role)
    out = []
    for name, roles in seen.items():
        model = config.models[name]
        ep = config.endpoints[model.endpoint]
        if ep.kind == "local":
            continue
        caps = ["chat"]
        if ep.structured_output != "none":
            caps.append("structured")
        if roles & tools:
            caps.append("tools")
        if model.serving.get("reasoning_parser"):
            caps.append("reasoning")
        if model.vision:
            caps.append("images")
        if ep.batch:
            caps.append("batch")
        out.append((name, caps))
    return out


def _request(capability: str, tool_choice: str = "required"):
    from .llm import LLMRequest
    from .llm.images import user_content

    kw = dict(item_id=f"preflight:{capability}", prompt_name="preflight", prompt_sha256="0" * 64)
    if capability in ("structured", "reasoning"):
        return LLMRequest(messages=[{"role": "user", "content": "Is water wet? Answer in JSON."}], schema=SCHEMA,
                          schema_name="preflight", **kw)
    if capability == "tools":  # the tool must be called: tool_choice "required" (one function offered)
        return LLMRequest(messages=[{"role": "user", "content": "What time is it? Use the tool."}], tools=[TOOL],
                          tool_choice=tool_choice, **kw)
    if capability == "images":
        tmp = Path(os.environ.get("TMPDIR", "/tmp")) / f"aura-preflight-{os.getpid()}.png"
        tmp.write_bytes(_png())
        try:
            content = user_content("What colour is this square? One word.", [tmp])
        finally:
            tmp.unlink(missing_ok=True)
        return LLMRequest(messages=[{"role": "user", "content": content}], **kw)
    return LLMRequest(messages=[{"role": "user", "content": QUESTION}], **kw)


def _client(ep, key: str | None):
    import openai

    return openai.OpenAI(base_url=ep.base_url, api_key=key or "not-needed", max_retries=2, timeout=ep.timeout_s)


def _check_batch(config: Config, ep, result: Check) -> Check:
    """The endpoint's batch API (the adapter the batch runner uses: OpenAI's Batch API at base_url, Anthropic's
    Message Batches at batch_base_url) lists one batch: nothing is created, nothing billed."""
    from .llm.batch import batch_api

    api = batch_api(ep, (config.raw.get("llm") or {}).get("batch") or {})
    try:
        api.listing()
        result.ok, result.message = True, f"{api.label} listing answered"
    except api.errors as exc:
        result.message = f"{api.label}: {' '.join(api.describe(exc).split())[:300]}"
    finally:
        api.close()
    return result


def check(config: Config, prep, name: str, capability: str) -> Check:
    """One capability of one model: one real call (or the batch listing)."""
    import openai

    from .llm.errors import FatalEndpointError, describe, endpoint_key
    from .llm.structured import parse_structured
    from .llm.types import usage_counts

    model = config.models[name]
    ep = config.endpoints[model.endpoint]
    result = Check(ep.name, name, capability, False, "")
    try:
        key = endpoint_key(ep)
    except FatalEndpointError:
        result.message = f"environment variable {ep.api_key_env} is not set"
        return result
    if capability == "batch":
        return _check_batch(config, ep, result)
    api, parser = _client(ep, key), model.serving.get("tool_call_parser")
    try:
        req = _request(capability, "auto" if parser else "required")  # auto: as an agent on vLLM sends it
        messages, params, rf, _ = prep(name, req)
        kwargs = {"model": model.model_id, "messages": messages, **params}
        if rf is not None:
            kwargs["response_format"] = rf
        if req.tools:
            kwargs["tools"] = req.tools
        completion = api.chat.completions.create(**kwargs)
    except openai.APIError as exc:
        result.message = " ".join(describe(exc).split())[:300]
        if capability == "tools" and parser:
            result.message = f"{_serve_with(name, parser, tools=True)}: {result.message}"
        return result
    except Exception as exc:  # noqa: BLE001 - a preflight reports whatever stops a call, one line each
        result.message = f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"
        return result
    result.tokens_in, result.tokens_out, _ = usage_counts(completion.usage)  # reasoning included, counted once
    details = getattr(completion.usage, "prompt_tokens_details", None)
    result.cost_usd = model.price.cost(result.tokens_in, result.tokens_out, getattr(details, "cached_tokens", 0))
    choice = completion.choices[0] if completion.choices else None
    if choice is None:
        result.message = "answered with no choices"
        return result
    text, finish = choice.message.content, choice.finish_reason
    if capability == "reasoning" and (problem := _reasoning_problem(choice.message, text)):
        result.message = f"{_serve_with(name, model.serving['reasoning_parser'])}: {problem}"
        return result
    if capability in ("structured", "reasoning"):
        _, reason = parse_structured(text, SCHEMA)
        if reason is not None:
            result.message = f"the answer does not parse against the schema ({reason}; finish_reason {finish})"
            return result
    if capability == "tools" and not choice.message.tool_calls:
        result.message = (f"{_serve_with(name, parser, tools=True)}: no structured tool_calls (finish_reason "
                          f"{finish})" if parser else f"no tool call although one was required (finish_reason {finish})")
        return result
    result.ok = True
    result.message = f"ok ({result.tokens_in}+{result.tokens_out} tokens, finish_reason {finish})"
    return result


def _serve_with(model: str, parser: str, tools: bool = False) -> str:
    flags = f"--enable-auto-tool-choice --tool-call-parser {parser}" if tools else f"--reasoning-parser {parser}"
    return f"model {model}: its server needs {flags}"


def _reasoning_problem(message, text: str | None) -> str | None:
    """Why a reasoning model's answer is not as its server's reasoning parser gives it; None when it is."""
    extra = getattr(message, "model_extra", None) or {}
    if "<think>" in (text or "") or "</think>" in (text or ""):
        return "its reasoning came inside content (a <think> block), not separated from the answer"
    if not (extra.get("reasoning_content") or extra.get("reasoning")):
        return "no reasoning came separated (no reasoning_content or reasoning field)"
    return None


def preflight(config: Config, stream=None) -> list[Check]:
    """Every check of :func:`plan`, one line each on ``stream`` (default stdout) as it completes."""
    from .estimate import offline_client

    stream = stream or sys.stdout
    prep = offline_client(config).prepare
    checks = []
    for name, caps in plan(config):
        for capability in caps:
            c = check(config, prep, name, capability)
            print(c.line(), file=stream, flush=True)
            checks.append(c)
    return checks


def calibrate(config: Config, k: int, stream=None) -> tuple[int, float]:
    """Send the first ``k`` uncached requests of every exact estimate line on a remote endpoint as its stage
    sends them, through the cache (so the run reuses the answers: paid once), and log the calls under
    ``<paths.logs>/preflight/``, where `aura estimate` reads them (measured lines). Returns (calls, cost)."""
    from .estimate import SAMPLE_REQUESTS, family_lines
    from .llm import Cache, LLMClient
    from .llm.accounting import Accounting

    stream = stream or sys.stdout
    k = min(k, SAMPLE_REQUESTS)
    lines = [ln for ln in family_lines(config) if ln.role is not None and ln.model in config.models
             and config.endpoints[config.models[ln.model].endpoint].kind != "local"]
    calls, cost = 0, 0.0
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    log = record_path(config).with_name(f"calibrate.{config.hash[:16]}.{stamp}.{os.getpid()}.calls.jsonl")
    acc = Accounting(label="calibrate", stream=io.StringIO())
    client = LLMClient(config, Cache(config.paths["cache"]), acc)
    client.batch = None  # K live calls per line, not a batch each (which may take up to a day to come back)
    try:
        calls, cost = _calibrate_lines(client, acc, lines, k, stream)
    finally:  # what was paid is measured, however calibration ends
        client.__exit__(None, None, None)
        log.parent.mkdir(parents=True, exist_ok=True)
        acc.write_records(log)
    return calls, cost


def _calibrate_lines(client, acc, lines, k: int, stream) -> tuple[int, float]:
    """Each line's first ``k`` sample requests, one line of output each; (calls sent, their cost)."""
    from .errors import UserError
    from .llm.errors import FatalEndpointError, StageFailed, TooManyFailures

    calls, cost = 0, 0.0
    for ln in lines:
        if not ln.sample:
            print(f"calibrate {ln.stage:<34} {ln.model:<22} not calibrated: its inputs do not exist yet "
                  f"({ln.basis}); a small real run's call logs measure it", file=stream)
            continue
        before = len(acc.records)
        try:
            client.run(ln.role, ln.model, ln.sample[:k], desc=f"calibrate:{ln.stage}")
        except (FatalEndpointError, TooManyFailures, StageFailed, UserError) as exc:
            print(f"calibrate {ln.stage:<34} {ln.model:<22} FAIL {' '.join(str(exc).split())[:300]}", file=stream)
            continue
        recs = acc.records[before:]
        sent = [r for r in recs if not r.cache_hit]
        calls, cost = calls + len(sent), cost + sum(r.cost_usd for r in recs)
        mean = (lambda f: sum(getattr(r, f) or 0 for r in sent) / len(sent)) if sent else (lambda f: 0)
        print(f"calibrate {ln.stage:<34} {ln.model:<22} {len(sent)} call(s): {mean('tokens_in'):.0f} in, "
              f"{mean('tokens_out'):.0f} out, {mean('tokens_reasoning'):.0f} reasoning per call", file=stream)
    return calls, cost


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--configfile", required=True)
    p.add_argument("--calibrate", type=int, metavar="K", default=0,
                   help="after the checks, send K real requests (at most 32) of each stage and model whose inputs "
                        "exist, live and through the cache (the run reuses them); `aura estimate` then prices those "
                        "lines from what they used")


def run(args: argparse.Namespace) -> int:
    try:
        config = load_config(args.configfile)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    checks = preflight(config)
    ok = bool(checks) and all(c.ok for c in checks)
    cost = sum(c.cost_usd for c in checks)
    failed = sum(not c.ok for c in checks)
    path = record_path(config)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"config": str(args.configfile), "config_hash": config.hash, "passed": ok,
                               "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                               "cost_usd": cost, "checks": [asdict(c) for c in checks]}, indent=1), encoding="utf-8")
    tmp.replace(path)
    what = "no remote model to check" if not checks else f"{len(checks) - failed} of {len(checks)} checks passed"
    print(f"preflight: {what}; cost ${cost:.4f}; {path}", file=sys.stderr)
    if ok and args.calibrate > 0:
        sent, usd = calibrate(config, args.calibrate)
        print(f"preflight --calibrate {args.calibrate}: {sent} call(s), cost ${usd:.4f}; `python -m aura estimate "
              f"--configfile {args.configfile}` now prices the calibrated lines from them", file=sys.stderr)
    return 0 if ok else 1


__all__ = ["Check", "plan", "check", "preflight", "calibrate", "record_path",
           "add_arguments", "run"]
