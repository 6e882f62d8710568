"""The LLM layer against a real HTTP fake server: cache, retries, give-up, structured output,
concurrency, accounting. The openai client is never monkeypatched."""
from __future__ import annotations

import io
import json
import time
from pathlib import Path

import pytest

from aura.llm import Cache, LLMClient, LLMRequest
from aura.llm.accounting import Accounting

SCHEMA = {"type": "object", "properties": {"rationale": {"type": "string"}, "label": {"enum": ["Safe", "Unsafe"]}},
          "required": ["rationale", "label"], "additionalProperties": False}


def req(i=0, text="Is this safe?", schema=None, **kw) -> LLMRequest:
    return LLMRequest(item_id=f"it{i}", messages=[{"role": "user", "content": f"{text} #{i}"}],
                      prompt_name="test.v1", prompt_sha256="0" * 64, schema=schema, **kw)


def client(config, tmp_path=None):
    return LLMClient(config, Cache(config.paths["cache"]), Accounting(label="test", stream=io.StringIO()))


def test_plain_call_records_tokens_latency_cost(make_config, server):
    cfg = make_config()
    with client(cfg) as llm:
        (res,) = llm.run("judge", "m", [req()])
    assert res.status == "ok" and res.text == "ok"
    (rec,) = res.calls
    assert rec.tokens_in > 0 and rec.tokens_out > 0 and rec.latency_s > 0 and not rec.cache_hit
    assert rec.cost_usd == pytest.approx((rec.tokens_in * 1.0 + rec.tokens_out * 2.0) / 1e6)
    assert rec.prompt_name == "test.v1" and rec.role == "judge" and rec.model == "m"
    assert "SUMMARY test: items=1 ok=1" in llm.acc.summary()


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
    t0 = time.perf_counter()
    with client(make_config(max_tries=3, backoff_base_s=30, backoff_max_s=30)) as llm:
        (res,) = llm.run("judge", "m", [req()])
    # two waits of Retry-After (0.2 s each) instead of a backoff of up to 30 s
    assert 0.4 <= time.perf_counter() - t0 < 5
    assert res.status == "ok" and res.text == "fine"
    assert res.calls[0].attempts == 3
    assert server.stats()["count"] == 3


def test_retry_after_is_waited(make_config, server):
    server.set_rules([{"times": 1, "status": 503, "retry_after": 0.5}, {"content": "fine"}])
    t0 = time.perf_counter()
    with client(make_config(backoff_base_s=0.0, backoff_max_s=0.0)) as llm:
        (res,) = llm.run("judge", "m", [req()])
    assert res.status == "ok" and time.perf_counter() - t0 >= 0.5


def test_retry_on_500_then_success(make_config, server):
    server.set_rules([{"times": 1, "status": 500}, {"content": "fine"}])
    with client(make_config()) as llm:
        (res,) = llm.run("judge", "m", [req()])
    assert res.status == "ok" and res.calls[0].attempts == 2


def test_bounded_give_up_is_recorded_as_failure(make_config, server):
    server.set_rules([{"status": 500}])
    with client(make_config(max_tries=3)) as llm:
        results = llm.run("judge", "m", [req(0), req(1)])
        assert llm.acc.outcomes["failed"] == 2
    assert [r.status for r in results] == ["failed", "failed"]
    assert all("gave up after 3 tries" in r.error and "HTTP 500" in r.error for r in results)
    assert server.stats()["count"] == 6
    assert not list(Path(make_config().paths["cache"]).glob("*/*.json"))  # failures are never cached


def test_timeout_is_retried_then_fails(make_config, server):
    server.set_rules([{"hang": True}])
    with client(make_config(timeout_s=0.3, max_tries=2)) as llm:
        (res,) = llm.run("judge", "m", [req()])
    assert res.status == "failed" and "APITimeoutError" in res.error


def test_malformed_body_is_retried(make_config, server):
    server.set_rules([{"times": 1, "malformed_body": True}, {"content": "fine"}])
    with client(make_config()) as llm:
        (res,) = llm.run("judge", "m", [req()])
    assert res.status == "ok" and res.calls[0].attempts == 2


def test_client_error_is_not_retried(make_config, server):
    server.set_rules([{"status": 400}])
    with client(make_config(max_tries=5)) as llm:
        (res,) = llm.run("judge", "m", [req()])
    assert res.status == "failed" and "non-retryable HTTP 400" in res.error
    assert server.stats()["count"] == 1


@pytest.mark.parametrize("style,expected", [
    ("json_schema", "json_schema"), ("json_object_schema", "json_object"), ("json_object", "json_object"),
    ("none", None)])
def test_structured_output_adapts_to_endpoint(make_config, server, style, expected):
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
    prompt_has_schema = '"Unsafe"' in " ".join(m["content"] for m in body["messages"])
    assert prompt_has_schema == (style in ("json_object", "none"))


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


def test_truncated_answer_is_unparsed(make_config, server):
    server.set_rules([{"truncated": '{"rationale": "this goes on and o'}])
    with client(make_config(repair_tries=0)) as llm:
        (res,) = llm.run("judge", "m", [req(schema=SCHEMA)])
    assert res.status == "unparsed" and res.finish_reason == "length"


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
        with pytest.raises(RuntimeError, match="AURA_TEST_KEY is not set"):
            llm.run("judge", "m", [req()])


def test_reasks_add_calls_but_not_items(make_config, server):
    with client(make_config()) as llm:
        llm.run("judge", "m", [req(0), req(1)])
        llm.run("judge", "m", [req(0, text="Again:")], reasks=True)
        assert (llm.acc.items_total, llm.acc.items_done, llm.acc.calls) == (2, 2, 3)
        assert "items=2 ok=2" in llm.acc.summary()
