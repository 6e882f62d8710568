"""The LLM layer against a real HTTP fake server: cache, retries, give-up, structured output,
concurrency, accounting. The openai client is never monkeypatched; waits and latency are measured
through an injected sleep and clock, never the wall clock."""
from __future__ import annotations

import asyncio
import email.utils
import io
import itertools
import json
import random
import time
from pathlib import Path

import httpx
import openai
import pytest

from aura.llm import Cache, LLMClient, LLMRequest
from aura.llm.accounting import Accounting
from aura.llm.errors import FatalEndpointError, TooManyFailures, is_retryable, retry_after_s

SCHEMA = {"type": "object", "properties": {"rationale": {"type": "string"}, "label": {"enum": ["Safe", "Unsafe"]}},
          "required": ["rationale", "label"], "additionalProperties": False}


def req(i=0, text="Is this safe?", schema=None, **kw) -> LLMRequest:
    return LLMRequest(item_id=f"it{i}", messages=[{"role": "user", "content": f"{text} #{i}"}],
                      prompt_name="test.v1", prompt_sha256="0" * 64, schema=schema, **kw)


class Sleeps:
    """Injected sleep: records every wait, waits no time."""

    def __init__(self):
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)
        await asyncio.sleep(0)


def client(config, tmp_path=None, **inject):
    return LLMClient(config, Cache(config.paths["cache"]), Accounting(label="test", stream=io.StringIO()), **inject)


def test_plain_call_records_tokens_latency_cost(make_config, server):
    cfg = make_config()
    with client(cfg, clock=itertools.count(10.0, 0.25).__next__) as llm:  # latency = one clock step
        (res,) = llm.run("judge", "m", [req()])
    assert res.status == "ok" and res.text == "ok"
    (rec,) = res.calls
    # fake server: prompt tokens = len("Is this safe? #0") // 4 = 16 // 4 = 4; completion = max(1, len("ok") // 4) = 1
    assert (rec.tokens_in, rec.tokens_out, rec.latency_s, rec.cache_hit) == (4, 1, 0.25, False)
    # price 1.0 $/Mtok in, 2.0 $/Mtok out: (4 * 1.0 + 1 * 2.0) / 1e6
    assert rec.cost_usd == pytest.approx(6e-6)
    assert rec.prompt_name == "test.v1" and rec.role == "judge" and rec.model == "m"
    assert rec.started_at <= rec.answered_at <= time.time()  # asked for, then answered (wall clock)
    assert "SUMMARY test: requests=1 ok=1" in llm.acc.summary()


def test_cache_hit_makes_no_http_request(make_config, server):
    cfg = make_config()
    with client(cfg) as llm:
        first = llm.run("judge", "m", [req(i) for i in range(5)])
    assert server.stats()["count"] == 5
    with client(cfg) as llm:
        second = llm.run("judge", "m", [req(i) for i in range(5)])
        assert llm.acc.calls == 0 and llm.acc.cache_hits == 5
    assert server.stats()["count"] == 5
    assert [r.text for r in first] == [r.text for r in second]
    assert all(c.cache_hit and c.cost_usd == 0 for r in second for c in r.calls)


def _key(cfg, request):
    return LLMClient(cfg).prepare("m", request)[3]


@pytest.mark.parametrize("param,value", [("temperature", 0.7), ("max_tokens", 65), ("seed", 2), ("top_p", 0.9),
                                         ("stop", ["\n"]), ("presence_penalty", 0.1)])
def test_cache_key_changes_with_each_sampling_param(make_config, param, value):
    cfg = make_config()
    base = _key(cfg, req())
    assert _key(cfg, req(params={param: value})) != base
    models = json.loads(json.dumps(cfg.raw["models"]))
    models["m"]["params"][param] = value
    assert _key(make_config({"models": models}), req()) != base


def test_cache_key_changes_with_schema_messages_sample_and_base_url(make_config):
    cfg = make_config()
    base = _key(cfg, req())
    assert _key(cfg, req(schema=SCHEMA)) != base
    other_schema = {**SCHEMA, "properties": {**SCHEMA["properties"], "label": {"enum": ["A", "B"]}}}
    assert _key(cfg, req(schema=SCHEMA)) != _key(cfg, req(schema=other_schema))
    assert _key(cfg, req(text="Is that safe?")) != base
    assert _key(cfg, req(sample_index=1)) != base
    assert _key(make_config(base_url="http://127.0.0.1:1/v1"), req()) != base
    assert _key(make_config(structured_output="json_object_schema"), req(schema=SCHEMA)) != _key(cfg, req(schema=SCHEMA))


def test_cache_key_ignores_retry_timeout_and_concurrency(make_config):
    base = _key(make_config(), req(schema=SCHEMA))
    assert _key(make_config(max_tries=9, timeout_s=1, backoff_base_s=3, max_concurrency=1, repair_tries=0),
                req(schema=SCHEMA)) == base


def test_retry_on_429_honours_retry_after_then_succeeds(make_config, server):
    server.set_rules([{"times": 2, "status": 429, "retry_after": 0.2}, {"content": "fine"}])
    sleeps = Sleeps()
    with client(make_config(max_tries=3, backoff_base_s=30, backoff_max_s=30), sleep=sleeps) as llm:
        (res,) = llm.run("judge", "m", [req()])
    assert sleeps.waits == [0.2, 0.2]  # the server's Retry-After twice, not a backoff of up to 30 s
    assert res.status == "ok" and res.text == "fine"
    assert res.calls[0].attempts == 3
    assert server.stats()["count"] == 3


def test_retry_after_is_waited(make_config, server):
    server.set_rules([{"times": 1, "status": 503, "retry_after": 0.5}, {"content": "fine"}])
    sleeps = Sleeps()
    with client(make_config(backoff_base_s=0.0, backoff_max_s=0.0), sleep=sleeps) as llm:
        (res,) = llm.run("judge", "m", [req()])
    assert res.status == "ok" and sleeps.waits == [0.5] and server.stats()["count"] == 2


@pytest.mark.parametrize("header", ["soon", "-5", "Wed, 21 Oct 2015 07:28:00 GMT", "nan", "86400"])
def test_unusable_retry_after_falls_back_to_backoff(make_config, server, header):
    """Malformed, negative, past, not a number, or longer than 300 s: jittered backoff instead."""
    server.set_rules([{"times": 1, "status": 429, "retry_after": header}, {"content": "fine"}])
    sleeps = Sleeps()
    with client(make_config(backoff_base_s=0.4, backoff_max_s=30), sleep=sleeps, rng=random.Random(7)) as llm:
        (res,) = llm.run("judge", "m", [req()])
    # attempt 1 backs off uniform(0, min(cap, base * 2**0)) = uniform(0, 0.4), drawn from Random(7)
    assert sleeps.waits == [random.Random(7).uniform(0, 0.4)]
    assert res.status == "ok" and res.calls[0].attempts == 2


def test_future_http_date_retry_after_is_used():
    """An HTTP-date Retry-After counts from `now` (a fixed instant here, no wall clock)."""
    now = 1_700_000_000.0
    request = httpx.Request("POST", "http://x/v1/chat/completions")

    def error(header: str) -> openai.RateLimitError:
        return openai.RateLimitError("429", response=httpx.Response(429, headers={"retry-after": header},
                                                                    request=request), body=None)

    assert retry_after_s(error(email.utils.formatdate(now + 120, usegmt=True)), now=now) == 120.0
    assert retry_after_s(error(email.utils.formatdate(now - 5, usegmt=True)), now=now) is None  # past
    assert retry_after_s(error("2.5"), now=now) == 2.5


def test_retry_on_500_then_success(make_config, server):
    server.set_rules([{"times": 1, "status": 500}, {"content": "fine"}])
    with client(make_config()) as llm:
        (res,) = llm.run("judge", "m", [req()])
    assert res.status == "ok" and res.calls[0].attempts == 2 and server.stats()["count"] == 2


def test_empty_choices_are_retried(make_config, server):
    server.set_rules([{"times": 2, "empty_choices": True}, {"content": "fine"}])
    with client(make_config(max_tries=3)) as llm:
        (res,) = llm.run("judge", "m", [req()])
    assert res.status == "ok" and res.text == "fine" and res.calls[0].attempts == 3
    assert server.stats()["count"] == 3


def test_bounded_give_up_is_recorded_as_failure(make_config, server):
    server.set_rules([{"status": 500}])
    cfg = make_config({"llm": {"max_failed_items": 2}}, max_tries=3)
    with client(cfg) as llm:
        results = llm.run("judge", "m", [req(0), req(1)])
        assert llm.acc.outcomes["failed"] == 2
        assert sorted(llm.acc.failed_items) == [("it0", results[0].error), ("it1", results[1].error)]
    assert [r.status for r in results] == ["failed", "failed"]
    assert all(r.error == "gave up after 3 tries: HTTP 500: InternalServerError: fake error 500" for r in results)
    assert server.stats()["count"] == 6  # 2 items x 3 tries
    assert not list(Path(cfg.paths["cache"]).glob("*/*.json"))  # failures are never cached


def test_failed_items_over_the_ceiling_stop_the_job(make_config, server):
    # items #3 and #7 fail every try; the other 8 answer
    server.set_rules([{"match": {"contains": "#3"}, "status": 503}, {"match": {"contains": "#7"}, "status": 503}])
    # default ceiling: max(llm.max_failed_items=1, int(0.05 * 10) = 0) = 1 failed item; 2 > 1
    with client(make_config(max_tries=2)) as llm:
        with pytest.raises(TooManyFailures, match=r"^2 of 10 items failed, over the ceiling of 1 .*"
                                                  r"2x gave up after 2 tries: HTTP 503"):
            llm.run("judge", "m", [req(i) for i in range(10)])
    # a ceiling of 2 lets the job finish: both failures listed with their reason, counted
    with client(make_config({"llm": {"max_failed_items": 2}}, max_tries=2)) as llm:
        results = llm.run("judge", "m", [req(i) for i in range(10)])
        assert llm.acc.outcomes == {"ok": 8, "unparsed": 0, "failed": 2}
        assert sorted(i for i, _ in llm.acc.failed_items) == ["it3", "it7"]
    assert [r.item_id for r in results if r.status == "failed"] == ["it3", "it7"]


@pytest.mark.parametrize("items,failing,ok", [(3, 1, True), (3, 2, False), (40, 2, True), (40, 3, False)])
def test_failure_ceiling_share_and_floor(make_config, items, failing, ok):
    """allowed = max(max_failed_items=1, int(0.05 * items)): 3 items -> 1; 40 items -> 2."""
    llm = client(make_config())
    assert (failing <= llm.failure_ceiling(items)) == ok


def test_timeout_is_retried_then_fails(make_config, server):
    server.set_rules([{"hang": True}])
    with client(make_config(timeout_s=0.3, max_tries=2)) as llm:
        (res,) = llm.run("judge", "m", [req()])
    assert res.status == "failed" and res.error.startswith("gave up after 2 tries: APITimeoutError")
    assert res.calls[0].attempts == 2 and server.stats()["count"] == 2  # the hang was asked twice


def test_malformed_body_is_retried(make_config, server):
    server.set_rules([{"times": 1, "malformed_body": True}, {"content": "fine"}])
    with client(make_config()) as llm:
        (res,) = llm.run("judge", "m", [req()])
    assert res.status == "ok" and res.calls[0].attempts == 2 and server.stats()["count"] == 2


@pytest.mark.parametrize("status,message", [
    (400, "Unrecognized request argument supplied: temprature"), (401, "Incorrect API key provided"),
    (403, "Project does not have access"), (404, "The model `fake-model` does not exist"), (422, "bad")])
def test_non_retryable_error_stops_the_job(make_config, server, status, message):
    server.set_rules([{"status": status, "message": message}])
    cfg = make_config(max_tries=5)
    with client(cfg) as llm:
        with pytest.raises(FatalEndpointError) as info:
            llm.run("judge", "m", [req()])
        (rec,) = llm.acc.records  # the call that stopped the job is in the call log
        assert rec.status == "failed" and rec.attempts == 1
    line = str(info.value)
    assert "\n" not in line
    assert line.startswith(f"endpoint 'fake' ({server.base_url}), model 'fake-model': non-retryable HTTP {status}")
    assert line.endswith(message)
    assert server.stats()["count"] == 1  # never retried


def test_fatal_error_cancels_the_remaining_calls(make_config, server):
    server.set_rules([{"times": 1, "status": 401, "message": "bad key"}, {"delay": 0.3, "content": "ok"}])
    with client(make_config(max_concurrency=2)) as llm:
        with pytest.raises(FatalEndpointError, match="bad key"):
            llm.run("judge", "m", [req(i) for i in range(20)])
    # at most the 2 first requests plus one that took the freed slot before the cancellation
    assert server.stats()["count"] <= 3
    assert not list(Path(make_config().paths["cache"]).glob("*/*.json"))


@pytest.mark.parametrize("rule", [
    {"code": "context_length_exceeded", "message": "Input too long"},  # OpenAI: by code
    {"message": "This model's maximum context length is 8192 tokens. However, you requested 9000 tokens"},  # vLLM
    {"message": "prompt is too long: 210000 tokens > 200000 maximum"}])  # Anthropic's compatible endpoint
def test_prompt_too_long_fails_the_item_only_whatever_the_server_says(make_config, server, rule):
    server.set_rules([{"match": {"contains": "#1"}, "status": 400, **rule}])
    with client(make_config(max_tries=5)) as llm:
        results = llm.run("judge", "m", [req(i) for i in range(3)])
    assert [r.status for r in results] == ["ok", "failed", "ok"]
    assert results[1].error == f"non-retryable HTTP 400: BadRequestError: {rule['message']}"
    assert server.stats()["count"] == 3


def test_only_transient_errors_are_retryable():
    request = httpx.Request("POST", "http://x/v1/chat/completions")
    assert is_retryable(openai.APITimeoutError(request))
    assert is_retryable(json.JSONDecodeError("Expecting value", "{", 1))  # a cut-off body
    assert not is_retryable(ValueError("a bug in our own code"))
    assert not is_retryable(KeyError("choices"))


@pytest.mark.parametrize("style,expected", [
    ("json_schema", "json_schema"), ("json_object_schema", "json_object"), ("gbnf_schema", None),
    ("json_object", "json_object"), ("none", None)])
def test_structured_output_adapts_to_endpoint(make_config, server, style, expected):
    if style == "gbnf_schema":
        grammar = converted(SCHEMA)
    server.set_rules([{"json": {"rationale": "r", "label": "Unsafe"}}])
    with client(make_config(structured_output=style)) as llm:
        (res,) = llm.run("judge", "m", [req(schema=SCHEMA)])
    assert res.status == "ok" and res.parsed == {"rationale": "r", "label": "Unsafe"}
    body = server.requests()[-1]["body"]
    assert (body.get("response_format") or {}).get("type") == expected
    if style == "json_schema":
        assert body["response_format"]["json_schema"]["schema"] == SCHEMA
    if style == "json_object_schema":
        assert body["response_format"]["schema"] == SCHEMA
    # gbnf_schema: the schema as the embedded engine's grammar, in the body's grammar field
    assert body.get("grammar") == (grammar if style == "gbnf_schema" else None)
    prompt_has_schema = '"Unsafe"' in " ".join(m["content"] for m in body["messages"])
    assert prompt_has_schema == (style in ("json_object", "none"))


def converted(schema: dict) -> str:
    """The GBNF grammar of `schema` a remote llama.cpp endpoint gets (llama-cpp-python's converter, which the
    source build installs beside the binary). The default install has none: the xllamacpp engine reads its own
    form (test_the_wheel_engine_gets_the_schema_as_compact_llguidance_json)."""
    from aura.llm.llama_engine import EngineError, schema_grammar

    try:
        grammar = schema_grammar(schema, "llama-server")
    except EngineError as exc:
        pytest.skip(f"no GBNF converter in this environment (the source build installs it): {exc}")
    assert 'space ::= " "?' in grammar and '"\\"Unsafe\\""' in grammar  # single spaces; the label's enum
    root = next(line for line in grammar.splitlines() if line.startswith("root ::="))
    assert root.index("rationale-kv") < root.index("label-kv"), root  # the schema's order: rationale first
    return grammar


def test_the_wheel_engine_gets_the_schema_as_compact_llguidance_json():
    from aura.llm.llama_engine import schema_grammar

    grammar = schema_grammar(SCHEMA, "xllamacpp")
    head, _, body = grammar.partition("\nstart: %json ")
    assert head == "%llguidance {}"
    spec = json.loads(body)
    # no whitespace but the separators; the schema itself unchanged, its properties in its order
    assert spec.pop("x-guidance") == {"whitespace_flexible": False, "item_separator": ", ", "key_separator": ": "}
    assert spec == SCHEMA and list(spec["properties"]) == list(SCHEMA["properties"])


def test_the_wheel_engine_gets_objects_closed_as_the_gbnf_converter_reads_them():
    """An object that lists its properties and says nothing of others admits only those under llama-cpp-python's
    converter; llguidance would admit any key, so the wheel's grammar says additionalProperties false, at every
    depth, and leaves a schema's own additionalProperties (true, false or a schema) and property-less objects as
    they are."""
    from aura.llm.llama_engine import schema_grammar

    open_schema = {"type": "object", "properties": {
        "tool": {"const": "ls"},
        "args": {"type": "object", "properties": {"path": {"type": "string"}}},
        "extra": {"type": "object", "properties": {"k": {"type": "string"}}, "additionalProperties": True},
        "free": {"type": "object"},
        "steps": {"type": "array", "items": {"anyOf": [{"type": "object", "properties": {"n": {"type": "integer"}}},
                                                       {"type": "string"}]}}}}
    spec = json.loads(schema_grammar(open_schema, "xllamacpp").partition("\nstart: %json ")[2])
    props = spec["properties"]
    assert spec["additionalProperties"] is False and props["args"]["additionalProperties"] is False
    assert props["steps"]["items"]["anyOf"][0]["additionalProperties"] is False
    assert props["extra"]["additionalProperties"] is True and "additionalProperties" not in props["free"]
    assert "additionalProperties" not in open_schema["properties"]["args"]  # the caller's schema is not changed


def test_json_is_extracted_from_surrounding_text(make_config, server):
    server.set_rules([{"content": 'Sure!\n```json\n{"rationale": "x", "label": "Safe"}\n```'}])
    with client(make_config(structured_output="none")) as llm:
        (res,) = llm.run("judge", "m", [req(schema=SCHEMA)])
    assert res.status == "ok" and res.parsed["label"] == "Safe"


def test_repair_reasks_once_then_succeeds(make_config, server):
    server.set_rules([{"times": 1, "content": "I think it is unsafe."}, {"json": {"rationale": "r", "label": "Safe"}}])
    with client(make_config(repair_tries=1)) as llm:
        (res,) = llm.run("judge", "m", [req(schema=SCHEMA)])
    assert res.status == "ok" and [c.purpose for c in res.calls] == ["answer", "repair"]
    repair_msgs = server.requests()[-1]["body"]["messages"]
    assert repair_msgs[-2] == {"role": "assistant", "content": "I think it is unsafe."}
    assert "could not be used" in repair_msgs[-1]["content"]


def test_unparsed_after_bounded_repair_keeps_raw_text(make_config, server):
    server.set_rules([{"json": {"rationale": "r", "label": "Maybe"}}])
    with client(make_config(repair_tries=2)) as llm:
        (res,) = llm.run("judge", "m", [req(schema=SCHEMA)])
        assert llm.acc.outcomes["unparsed"] == 1
    assert res.status == "unparsed" and res.parsed is None
    assert json.loads(res.text) == {"rationale": "r", "label": "Maybe"}
    assert "schema violation" in res.error and "label" in res.error
    assert len(res.calls) == 3 and server.stats()["count"] == 3


def test_a_repair_call_the_endpoint_fails_is_a_failed_item_not_unparsed(make_config, server):
    server.set_rules([{"times": 1, "content": "I think it is unsafe."}, {"status": 503}])
    with client(make_config(repair_tries=1, max_tries=2)) as llm:
        (res,) = llm.run("judge", "m", [req(schema=SCHEMA)])
        assert (llm.acc.outcomes["failed"], llm.acc.outcomes["unparsed"]) == (1, 0)
    assert res.status == "failed" and "503" in res.error and "first answer" in res.error
    assert [c.purpose for c in res.calls] == ["answer", "repair"]


CUT = {"truncated": '{"rationale": "this goes on and o'}  # finish_reason "length", no whole JSON


def _entries(cfg) -> list[dict]:
    return [json.loads(p.read_text()) for p in Path(cfg.paths["cache"]).glob("*/*.json")]


def test_a_cut_answer_is_asked_again_not_repaired_and_only_the_whole_one_is_cached(make_config, server):
    """The answer and its next try both cut (once the answer and its JSON repair, both cached: an unparsed
    vote for good): a cut structured answer is a retried outcome within max_tries, never cached."""
    server.set_rules([{"times": 2, **CUT}, {"json": {"rationale": "r", "label": "Unsafe"}}])
    sleeps = Sleeps()
    cfg = make_config(repair_tries=1, max_tries=3)
    with client(cfg, sleep=sleeps) as llm:
        (res,) = llm.run("judge", "m", [req(schema=SCHEMA)])
        totals = llm.acc.totals()
    assert res.status == "ok" and res.parsed["label"] == "Unsafe" and res.finish_reason == "stop"
    (rec,) = res.calls  # one answer call, three tries, no repair
    assert (rec.purpose, rec.attempts, totals["retries"]) == ("answer", 3, 2) and sleeps.waits == []
    # the two cut answers are paid: their tokens are in the record (fake server: 34 chars -> 8 tokens each)
    assert rec.tokens_out == 8 + 8 + len(json.dumps(res.parsed)) // 4
    assert [e["response"]["finish_reason"] for e in _entries(cfg)] == ["stop"]
    assert server.stats()["count"] == 3
    with client(cfg) as llm:  # the rerun reads the whole answer
        (again,) = llm.run("judge", "m", [req(schema=SCHEMA)])
    assert again.parsed == res.parsed and again.calls[0].cache_hit and server.stats()["count"] == 3


def test_an_answer_cut_on_every_try_fails_its_item_uncached(make_config, server):
    server.set_rules([CUT])
    cfg = make_config(repair_tries=1, max_tries=2)
    with client(cfg, sleep=Sleeps()) as llm:
        (res,) = llm.run("judge", "m", [req(schema=SCHEMA)])
        acc = llm.acc
    assert res.status == "failed" and "gave up after 2 tries: answer cut at the output cap" in res.error
    assert (acc.items_done, acc.outcomes["failed"], acc.failed_items) == (1, 1, [("it0", res.error)])
    assert res.calls[0].tokens_out == 16 and res.calls[0].cost_usd > 0  # paid, though failed
    assert _entries(cfg) == [] and server.stats()["count"] == 2
    with client(cfg, sleep=Sleeps()) as llm:  # a failed item is asked again on a rerun
        llm.run("judge", "m", [req(schema=SCHEMA)])
    assert server.stats()["count"] == 4


def test_a_cut_repair_is_asked_again(make_config, server):
    server.set_rules([{"times": 1, "content": "I think it is unsafe."}, {"times": 1, **CUT},
                      {"json": {"rationale": "r", "label": "Unsafe"}}])
    with client(make_config(repair_tries=1, max_tries=2), sleep=Sleeps()) as llm:
        (res,) = llm.run("judge", "m", [req(schema=SCHEMA)])
    assert res.status == "ok" and [(c.purpose, c.attempts) for c in res.calls] == [("answer", 1), ("repair", 2)]


@pytest.mark.parametrize("rule,schema", [({"json": {"rationale": "r", "label": "Safe"}, "finish_reason": "length"},
                                          SCHEMA),
                                         (CUT, None)])
def test_a_cut_answer_that_is_whole_or_plain_text_is_kept(make_config, server, rule, schema):
    """Cut, but whole JSON under the schema, or plain text (the stage reads it): answered once, cached."""
    server.set_rules([rule])
    cfg = make_config(repair_tries=0)
    with client(cfg) as llm:
        (res,) = llm.run("judge", "m", [req(schema=schema)])
    assert res.status == "ok" and res.finish_reason == "length" and server.stats()["count"] == 1
    assert len(_entries(cfg)) == 1


def test_concurrency_limit_per_endpoint_is_respected(make_config, server):
    server.set_rules([{"delay": 0.1, "content": "ok"}])
    with client(make_config(max_concurrency=3)) as llm:
        results = llm.run("judge", "m", [req(i) for i in range(15)])
    assert all(r.status == "ok" for r in results)
    stats = server.stats()
    assert stats["count"] == 15 and stats["max_in_flight"] == 3


def test_fan_out_is_concurrent(make_config, server):
    server.set_rules([{"delay": 0.2, "content": "ok"}])
    with client(make_config(max_concurrency=16)) as llm:
        llm.run("judge", "m", [req(i) for i in range(16)])
    assert server.stats()["max_in_flight"] > 8  # requests overlap: the fan-out is concurrent


def test_missing_api_key_env_is_a_clear_error(make_config, server, monkeypatch):
    monkeypatch.delenv("AURA_TEST_KEY", raising=False)
    with client(make_config(api_key_env="AURA_TEST_KEY")) as llm:
        with pytest.raises(FatalEndpointError, match="^endpoint 'fake': environment variable AURA_TEST_KEY is not set$"):
            llm.run("judge", "m", [req()])
    assert server.stats()["count"] == 0


def test_reasks_add_calls_but_not_items(make_config, server):
    with client(make_config()) as llm:
        llm.run("judge", "m", [req(0), req(1)])
        llm.run("judge", "m", [req(0, text="Again:")], reasks=True)
        assert (llm.acc.items_total, llm.acc.items_done, llm.acc.calls) == (2, 2, 3)
        assert "requests=2 ok=2" in llm.acc.summary()


def test_a_reask_that_fails_moves_the_item_to_failed(make_config, server):
    """Round 1 answers it0 and it1; it0 re-asked (a rule broken) then fails every try: the job's
    totals follow the item to `failed`, as the stage's row will."""
    with client(make_config(max_tries=2)) as llm:
        llm.run("judge", "m", [req(0), req(1)])
        server.set_rules([{"match": {"contains": "Again"}, "status": 500}])
        (res,) = llm.run("judge", "m", [req(0, text="Again:")], reasks=True)
        assert res.status == "failed"
        assert llm.acc.outcomes == {"ok": 1, "unparsed": 0, "failed": 1}
        assert llm.acc.failed_items == [("it0", res.error)] and llm.acc.items_done == 2
