"""Reasoning tokens in the LLM layer: read from the answer's usage (completion_tokens_details.reasoning_tokens),
kept in the cache entry (only when reported: older entries and every cache key unchanged), reported in the call
records, the call log, the job's one-line summary and totals, and `aura summary`; the cost counts them once.

The fake server's rule field ``reasoning_tokens: N`` answers as OpenAI does: completion_tokens includes the N
reasoning tokens and completion_tokens_details itemises them. Prices here: $1 / $2 per 1M input / output tokens
(conftest.base_config), so an answer's output costs 2e-6 USD a token."""
from __future__ import annotations

import io
import json

import pytest
from openai.types import CompletionUsage

from aura.io import read_jsonl
from aura.llm import Cache, LLMClient, LLMRequest
from aura.llm.accounting import Accounting
from aura.llm.types import usage_counts

CONTENT = "twelve chars"  # 12 characters: the fake server counts 12 // 4 = 3 visible completion tokens
SCHEMA = {"type": "object", "properties": {"rationale": {"type": "string"}, "label": {"enum": ["Safe", "Unsafe"]}},
          "required": ["rationale", "label"], "additionalProperties": False}


def req(i: int = 0, schema=None) -> LLMRequest:
    return LLMRequest(item_id=f"it{i}", messages=[{"role": "system", "content": "Rubric: label the action."},
                                                   {"role": "user", "content": f"action number {i}"}],
                      prompt_name="test.v1", prompt_sha256="0" * 64, schema=schema)


def run(cfg, requests, role="judge"):
    with LLMClient(cfg, Cache(cfg.paths["cache"]), Accounting(label="t", stream=io.StringIO())) as llm:
        return llm.run(role, "m", requests), llm.acc, llm


def entry_of(cfg, key: str) -> dict:
    return Cache(cfg.paths["cache"]).get(key)


# --- the usage of one answer ----------------------------------------------------------------------------

def test_usage_counts_takes_the_billed_output_once():
    # OpenAI: completion_tokens 403 already holds the 400 reasoning tokens (total = 50 + 403): taken as is
    openai_style = CompletionUsage(prompt_tokens=50, completion_tokens=403, total_tokens=453,
                                   completion_tokens_details={"reasoning_tokens": 400})
    assert usage_counts(openai_style) == (50, 403, 400)
    # a layer that counts them beside completion_tokens (total = 50 + 3 + 400 = 453): 3 + 400 = 403 billed output
    beside = CompletionUsage(prompt_tokens=50, completion_tokens=3, total_tokens=453,
                             completion_tokens_details={"reasoning_tokens": 400})
    assert usage_counts(beside) == (50, 403, 400)
    # completion_tokens 0 cannot hold 60 reasoning tokens (prompt 21, total 81): 0 + 60 = 60
    empty = CompletionUsage(prompt_tokens=21, completion_tokens=0, total_tokens=81,
                            completion_tokens_details={"reasoning_tokens": 60})
    assert usage_counts(empty) == (21, 60, 60)
    # none reported: None (not 0); reported 0 (a model that did not reason): 0
    assert usage_counts(CompletionUsage(prompt_tokens=5, completion_tokens=7, total_tokens=12)) == (5, 7, None)
    zero = CompletionUsage(prompt_tokens=5, completion_tokens=7, total_tokens=12,
                           completion_tokens_details={"reasoning_tokens": 0})
    assert usage_counts(zero) == (5, 7, 0)
    assert usage_counts(None) == (0, 0, None)


# --- live call, cache entry, cache hit, call log, job summary ---------------------------------------------

def test_reasoning_tokens_from_a_live_answer_are_recorded_and_cost_once(make_config, server, tmp_path):
    server.set_rules([{"content": CONTENT, "reasoning_tokens": 400}])
    cfg = make_config()
    (res,), acc, llm = run(cfg, [req()])
    (rec,) = res.calls
    assert res.status == "ok" and res.text == CONTENT
    # completion_tokens = 3 visible + 400 reasoning = 403 (the fake server counts them in, as OpenAI does)
    assert (rec.tokens_out, rec.tokens_reasoning) == (403, 400)
    # cost: input at $1/M, the 403 output tokens at $2/M, once: 403 x 2e-6 = 0.000806 USD of output
    # (403 + 400 counted twice would be 803 x 2e-6 = 0.001606)
    assert rec.cost_usd == pytest.approx(rec.tokens_in * 1e-6 + 403 * 2e-6, rel=1e-12)
    assert acc.cost_usd == pytest.approx(rec.tokens_in * 1e-6 + 0.000806, rel=1e-12)
    # the cache entry: the same billed output, and the reasoning tokens beside it
    usage = entry_of(cfg, rec.key)["response"]["usage"]
    assert usage == {"prompt_tokens": rec.tokens_in, "completion_tokens": 403, "reasoning_tokens": 400}
    # the call log (calls.jsonl) carries the field; the job summary line and totals count it
    acc.write_records(tmp_path / "t.calls.jsonl")
    (row,) = read_jsonl(tmp_path / "t.calls.jsonl")
    assert (row["tokens_out"], row["tokens_reasoning"]) == (403, 400)
    assert "tokens_out=403 tokens_reasoning=400 cost_usd=" in acc.summary()
    assert (acc.totals()["tokens_out"], acc.totals()["tokens_reasoning"]) == (403, 400)


def test_the_cache_key_does_not_depend_on_the_answer_and_old_entries_still_hit(make_config, server):
    server.set_rules([{"content": CONTENT}])  # no reasoning reported: an entry as every earlier one
    cfg = make_config()
    (res,), acc, llm = run(cfg, [req()])
    key = res.calls[0].key
    assert key == llm.prepare("m", req())[3]  # the key is the request's, whatever the answer says
    assert res.calls[0].tokens_reasoning is None
    assert "reasoning_tokens" not in entry_of(cfg, key)["response"]["usage"]  # only when the server said
    server.set_rules([{"content": CONTENT, "reasoning_tokens": 400}])
    before = server.stats()["count"]
    (again,), acc2, _ = run(cfg, [req()])
    assert again.calls[0].cache_hit and again.calls[0].key == key and server.stats()["count"] == before
    assert again.calls[0].tokens_reasoning is None and acc2.tokens_reasoning == 0


def test_a_cache_hit_reports_the_billed_output_of_the_entry(make_config, server):
    server.set_rules([{"content": CONTENT, "reasoning_tokens": 400}])
    cfg = make_config()
    run(cfg, [req()])
    before = server.stats()["count"]
    (res,), acc, _ = run(cfg, [req()])
    (rec,) = res.calls
    assert rec.cache_hit and server.stats()["count"] == before  # no request
    assert rec.tokens_out == 403 and rec.cost_usd == 0.0  # reasoning included, nothing paid again


def test_a_cache_hit_reports_its_reasoning_tokens(make_config, server):
    server.set_rules([{"content": CONTENT, "reasoning_tokens": 400}])
    cfg = make_config()
    run(cfg, [req()])
    (res,), acc, _ = run(cfg, [req()])
    assert res.calls[0].cache_hit and res.calls[0].tokens_reasoning == 400 and acc.tokens_reasoning == 400


def test_batch_answers_record_their_reasoning_tokens(make_config, server):
    server.set_rules([{"json": {"rationale": "r", "label": "Safe"}, "reasoning_tokens": 250}])
    cfg = make_config({"llm": {"batch": {"roles": ["judge"], "poll_s": 0.01, "poll_max_s": 0.02}}}, batch=True)
    results, acc, _ = run(cfg, [req(0, SCHEMA), req(1, SCHEMA)])
    assert [r.status for r in results] == ["ok", "ok"]
    batched = [r for r in acc.records if r.batch_id]  # the batch's own records (then one cache hit each)
    assert len(json.dumps({"rationale": "r", "label": "Safe"})) // 4 == 8  # 35 characters: 8 visible tokens
    assert [(r.tokens_out, r.tokens_reasoning) for r in batched] == [(8 + 250, 250)] * 2
    # at the batch discount (50%): output 258 x 2e-6 x 0.5 per answer, reasoning inside it once
    for r in batched:
        assert r.cost_usd == pytest.approx((r.tokens_in * 1e-6 + 258 * 2e-6) * 0.5, rel=1e-12)
        assert entry_of(cfg, r.key)["response"]["usage"]["reasoning_tokens"] == 250
    assert acc.tokens_reasoning == 2 * 250


# --- `aura summary` ----------------------------------------------------------------------------------

def test_the_stage_summary_line_adds_up_reasoning_tokens(tmp_path):
    from aura.pipeline.summary import collect, lines

    out = tmp_path / "out.jsonl"
    out.write_text("")

    def job(name, llm):
        path = tmp_path / "logs" / "summary" / "judge" / f"{name}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"stage": "judge", "label": name, "status": "ok", "outputs": [str(out)],
                                    "finished": 1.0, "llm": llm}))

    base = {"ok": 2, "unparsed": 0, "failed": 0, "calls": 2, "cache_hits": 0, "retries": 0}
    job("a", {**base, "tokens_out": 806, "tokens_reasoning": 800, "cost_usd": 0.002})
    job("b", {**base, "tokens_out": 10, "cost_usd": 0.001})  # written before reasoning tokens were recorded: 0
    (line,) = lines(collect(tmp_path / "logs"))
    # 806 + 10 = 816 completion tokens, 800 + 0 = 800 of them reasoning, $0.002 + $0.001 = $0.0030
    assert "retries=0 tokens_out=816 tokens_reasoning=800 cost_usd=0.0030" in line
