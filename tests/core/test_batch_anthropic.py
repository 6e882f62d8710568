"""`batch: anthropic` (aura.llm.batch_anthropic) against aura.simulator.batch_anthropic, a fake of Anthropic's
native Message Batches API that the real `anthropic` SDK talks to over HTTP: the answers land in the cache
as the entries a live call through the OpenAI layer writes, and the stage then reads them as cache hits
(no live call); the requests are translated field by field; a job killed while its batch runs resumes
that batch and never submits twice; errored results go live or fail their items, expired ones are
resubmitted or sent live, as on the OpenAI path (tests/core/test_batch.py)."""
from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from aura.config import ConfigError, validate_config
from aura.io import read_jsonl
from aura.llm import Cache, LLMClient, LLMRequest
from aura.llm.accounting import Accounting
from aura.llm.batch import BatchStillRunning
from aura.llm.errors import StageFailed
from conftest import REPO, base_config
from test_batch import judge_command
from aura.simulator.batch_anthropic import FakeAnthropicBatchServer

ENV = {**os.environ, "PYTHONPATH": str(REPO / "src")}
SCHEMA = {"type": "object", "properties": {"rationale": {"type": "string"}, "label": {"enum": ["Safe", "Unsafe"]}},
          "required": ["rationale", "label"], "additionalProperties": False}
FAST = {"poll_s": 0.01, "poll_max_s": 0.02}
PARAMS = {"temperature": 0.0, "max_tokens": 64}  # no seed: Anthropic takes none
ANSWERS = [{"match": {"contains": "number 1"}, "json": {"rationale": "r1", "label": "Unsafe"}},
           {"json": {"rationale": "fine", "label": "Safe"}}]


@pytest.fixture(scope="module")
def _fake_anthropic():
    with FakeAnthropicBatchServer() as srv:
        yield srv


@pytest.fixture
def anth(_fake_anthropic):
    _fake_anthropic.reset()
    yield _fake_anthropic
    _fake_anthropic.reset()


def reqs(n: int, schema=SCHEMA) -> list[LLMRequest]:
    return [LLMRequest(item_id=f"it{i}", messages=[{"role": "system", "content": "Rubric: label the action."},
                                                    {"role": "user", "content": f"action number {i}"}],
                       prompt_name="test.v1", prompt_sha256="0" * 64, schema=schema) for i in range(n)]


def models(server, tmp_path: Path, params=None, price=None) -> dict:
    out = base_config(server.base_url, tmp_path / "cache")["models"]
    for m in out.values():
        m["params"] = dict(PARAMS if params is None else params)
        if price is not None:
            m["price"] = price
    return out


def config(make_config, server, anth, tmp_path, roles=("judge",), params=None, price=None, cache=None, **options):
    """The fake endpoint as paper.yaml's anthropic one: the OpenAI layer for live calls (the fake OpenAI
    server), schema in the prompt, and the Message Batches API at batch_base_url (the fake Anthropic one)."""
    raw = {"models": models(server, tmp_path, params, price)}
    if roles:
        raw["llm"] = {"batch": {"roles": list(roles), **FAST, **options}}
    if cache:
        raw["paths"] = {**make_config().raw["paths"], "cache": str(tmp_path / cache)}
    return make_config(raw, structured_output="none", batch="anthropic", batch_base_url=anth.base_url)


def run(cfg, requests, role="judge"):
    with LLMClient(cfg, Cache(cfg.paths["cache"]), Accounting(label="t", stream=io.StringIO())) as llm:
        return llm.run(role, "m", requests), llm.acc


def live_calls(server) -> list[dict]:
    return [r for r in server.requests() if r["path"] == "/v1/chat/completions"]


def entries(cache: Path) -> dict[str, dict]:
    return {p.stem: json.loads(p.read_text()) for p in cache.glob("*/*.json")}


def states(cfg) -> list[dict]:
    return [json.loads(p.read_text()) for p in (Path(cfg.paths["cache"]).parent / "batches").glob("*.json")]


# --- answers in the cache, as a live call writes them -----------------------------------------------------
def test_batch_answers_are_the_entries_a_live_call_writes(make_config, server, anth, tmp_path):
    anth.set_rules(ANSWERS)
    cfg = config(make_config, server, anth, tmp_path)
    results, acc = run(cfg, reqs(3))
    assert [r.status for r in results] == ["ok"] * 3
    assert [r.parsed["label"] for r in results] == ["Safe", "Unsafe", "Safe"]
    # one batch, no live call: the stage's own calls were cache hits
    assert anth.creates == 1 and live_calls(server) == []
    assert acc.calls == 3 and acc.cache_hits == 3
    (state,) = states(cfg)
    assert state["api"] == "anthropic" and state["status"] == "done" and state["batch_id"] == "msgbatch_fake_1"
    assert state["final_status"] == "completed" and len(state["keys"]) == 3
    batched = entries(Path(cfg.paths["cache"]))

    server.set_rules(ANSWERS)  # the same requests live, through the OpenAI layer, into a fresh cache
    live_results, _ = run(config(make_config, server, anth, tmp_path, roles=(), cache="live_cache"), reqs(3))
    assert anth.creates == 1 and len(live_calls(server)) == 3
    live = entries(tmp_path / "live_cache")
    assert sorted(batched) == sorted(live) and len(live) == 3  # the same keys: custom_id = cache key
    for key in live:  # the same request, answer text, finish reason and usage; only ids and times differ
        assert batched[key]["request"] == live[key]["request"]
        for field in ("text", "finish_reason", "usage", "tool_calls", "model"):
            assert batched[key]["response"][field] == live[key]["response"][field], field
        assert set(batched[key]) == set(live[key]) and set(batched[key]["response"]) == set(live[key]["response"])
        assert batched[key]["response"]["id"].startswith("msg_fake_")
    assert [r.parsed for r in results] == [r.parsed for r in live_results]


def test_a_rerun_submits_nothing_and_counts_tokens_at_the_batch_discount(make_config, server, anth, tmp_path):
    # user message of 400 chars -> 100 input tokens; answer "ok" -> 1 output token
    anth.set_rules([{"text": "ok"}])
    price = {"input_per_mtok": 1.0, "output_per_mtok": 2.0}
    cfg = config(make_config, server, anth, tmp_path, price=price)
    one = [LLMRequest(item_id="a", messages=[{"role": "user", "content": "x" * 400}], prompt_name="t",
                      prompt_sha256="0")]
    (res,), acc = run(cfg, one)
    batch_rec = next(r for r in acc.records if not r.cache_hit)
    assert (batch_rec.tokens_in, batch_rec.tokens_out) == (100, 1) and batch_rec.batch_id == "msgbatch_fake_1"
    assert batch_rec.cost_usd == pytest.approx(102e-6 * 0.5)  # live 100 x $1 + 1 x $2 per 1M, at 50% off
    assert res.calls[0].cache_hit and res.calls[0].cost_usd == 0 and acc.cost_usd == pytest.approx(51e-6)
    run(cfg, one)  # cached: no batch, no call
    assert anth.creates == 1 and live_calls(server) == []


# --- the request, field by field --------------------------------------------------------------------------
def test_the_batch_request_field_by_field(make_config, server, anth, tmp_path):
    anth.set_rules([{"echo_schema_default": True}])
    params = {"temperature": 0.2, "top_p": 0.9, "max_tokens": 300, "stop": ["END"]}
    cfg = config(make_config, server, anth, tmp_path, params=params)
    results, _ = run(cfg, reqs(1))
    assert results[0].status == "ok" and results[0].parsed == {"rationale": "x", "label": "Safe"}
    (create,) = anth.posts()
    (request,) = create["body"]["requests"]
    (key,) = entries(Path(cfg.paths["cache"]))
    assert set(request) == {"custom_id", "params"} and request["custom_id"] == key and len(key) == 64
    p = request["params"]
    assert list(p) == ["model", "max_tokens", "system", "messages", "temperature", "top_p", "stop_sequences"]
    assert p["model"] == "fake-model" and p["max_tokens"] == 300
    assert p["temperature"] == 0.2 and p["top_p"] == 0.9 and p["stop_sequences"] == ["END"]
    # structured_output none: the schema instruction is part of the system prompt, which goes top-level
    assert p["system"].startswith("Rubric: label the action.\n\nAnswer with one JSON object only")
    assert json.dumps(SCHEMA) in p["system"]
    assert p["messages"] == [{"role": "user", "content": "action number 0"}]
    assert create["headers"]["anthropic-version"] and create["path"] == "/v1/messages/batches"


def test_message_params_translation():
    from aura.llm.batch_anthropic import message_params  # here: the anthropic SDK costs each worker 2 s to collect

    cfg = validate_config(base_config("http://127.0.0.1:9", Path("/tmp/unused/cache"), structured_output="none",
                                      batch="anthropic", extra_sampling=["top_k"]))
    model = cfg.models["m"]
    messages = [{"role": "system", "content": "Be brief."},
                {"role": "developer", "content": [{"type": "text", "text": "Use JSON."}]},
                {"role": "user", "content": [
                    {"type": "text", "text": "What is this?"},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
                    {"type": "image_url", "image_url": {"url": "https://example.org/a.jpg"}}]},
                {"role": "assistant", "content": "A picture."},
                {"role": "user", "content": "More."}]
    out = message_params(model, messages, {"max_completion_tokens": 50, "stop": ["a", "b"], "temperature": 1.0,
                                           "extra_body": {"top_k": 5}})
    assert out == {
        "model": "fake-model", "max_tokens": 50, "system": "Be brief.\n\nUse JSON.",
        "messages": [
            {"role": "user", "content": [
                {"type": "text", "text": "What is this?"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}},
                {"type": "image", "source": {"type": "url", "url": "https://example.org/a.jpg"}}]},
            {"role": "assistant", "content": "A picture."},
            {"role": "user", "content": "More."}],
        "temperature": 1.0, "stop_sequences": ["a", "b"], "top_k": 5}
    assert "system" not in message_params(model, [{"role": "user", "content": "q"}], {"max_tokens": 1})
    with pytest.raises(ConfigError, match=r"^model 'm' \(endpoint 'fake', batch: anthropic\): Anthropic requires "
                                          r"max_tokens; set it in the model's params"):
        message_params(model, messages, {"temperature": 0.0})
    with pytest.raises(ConfigError, match=r"params frequency_penalty, seed not taken by Anthropic's Message "
                                          r"Batches API"):
        message_params(model, messages, {"max_tokens": 5, "seed": 1, "frequency_penalty": 0.1})
    with pytest.raises(ConfigError, match=r"takes no response_format \(json_schema\); set the endpoint's "
                                          r"structured_output: none"):
        message_params(model, messages, {"max_tokens": 5}, rf={"type": "json_schema"})


def test_a_model_without_max_tokens_stops_the_job_before_anything_is_sent(make_config, server, anth, tmp_path):
    cfg = config(make_config, server, anth, tmp_path, params={"temperature": 0.0})
    with pytest.raises(ConfigError) as err:
        run(cfg, reqs(2))
    assert "\n" not in str(err.value) and "Anthropic requires max_tokens" in str(err.value)
    assert anth.requests() == [] and live_calls(server) == [] and states(cfg) == []


def test_results_become_chat_completions():
    import anthropic

    from aura.llm.batch_anthropic import chat_completion

    message = anthropic.types.Message.model_validate({
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-x", "stop_sequence": None,
        "content": [{"type": "text", "text": "{\"a\": "}, {"type": "text", "text": "1}"}],
        "stop_reason": "max_tokens",
        "usage": {"input_tokens": 10, "output_tokens": 7, "cache_read_input_tokens": 0,
                  "cache_creation_input_tokens": 0}})
    c = chat_completion(message)
    assert (c.id, c.model, c.choices[0].message.content, c.choices[0].finish_reason) == \
        ("msg_1", "claude-x", "{\"a\": 1}", "length")
    assert (c.usage.prompt_tokens, c.usage.completion_tokens, c.usage.prompt_tokens_details) == (10, 7, None)
    for stop, finish in (("end_turn", "stop"), ("stop_sequence", "stop"), ("refusal", "content_filter")):
        assert chat_completion(message.model_copy(update={"stop_reason": stop})).choices[0].finish_reason == finish


def test_a_max_tokens_stop_is_paid_not_cached_and_asked_again_live(make_config, server, anth, tmp_path):
    anth.set_rules([{"text": "{\"rationale\": \"cut", "stop_reason": "max_tokens"}])
    server.set_rules([{"json": {"rationale": "live", "label": "Safe"}}])
    cfg = config(make_config, server, anth, tmp_path)
    (res,), acc = run(cfg, reqs(1))
    # the batch's answer is cut (finish_reason length, no whole JSON): recorded and priced, never cached
    batch_rec = next(r for r in acc.records if r.batch_id)
    assert batch_rec.finish_reason == "length" and "not cached" in batch_rec.error and batch_rec.cost_usd > 0
    entry = entries(Path(cfg.paths["cache"]))[res.calls[0].key]  # the first call's own answer, asked live
    assert entry["response"]["finish_reason"] == "stop" and json.loads(entry["response"]["text"])["rationale"] == "live"
    assert res.status == "ok" and not res.calls[0].cache_hit and len(live_calls(server)) == 1


# --- failures: errored, expired, a batch past max_wait_s -------------------------------------------------
@pytest.mark.parametrize("on_failure", ["live", "failed"])
def test_errored_results_go_live_or_fail_their_items(make_config, server, anth, tmp_path, on_failure):
    anth.set_rules([{"match": {"contains": "number 1"}, "result": "errored", "error_type": "overloaded_error",
                     "message": "Overloaded"}, *ANSWERS[1:]])
    server.set_rules(ANSWERS)
    cfg = config(make_config, server, anth, tmp_path, on_failure=on_failure)
    results, _ = run(cfg, reqs(3))
    if on_failure == "live":
        assert [r.status for r in results] == ["ok"] * 3
        (call,) = live_calls(server)
        assert "number 1" in json.dumps(call["body"]) and results[1].parsed["label"] == "Unsafe"
    else:
        assert [r.status for r in results] == ["ok", "failed", "ok"] and live_calls(server) == []
        assert results[1].error == "batch msgbatch_fake_1: overloaded_error: Overloaded"
    assert anth.creates == 1
    (state,) = states(cfg)
    assert list(state["failed"].values()) == ["batch msgbatch_fake_1: overloaded_error: Overloaded"]


@pytest.mark.parametrize("on_expired", ["resubmit", "live"])
def test_expired_results_are_resubmitted_or_sent_live(make_config, server, anth, tmp_path, on_expired):
    anth.set_rules(ANSWERS)
    server.set_rules(ANSWERS)
    anth.set_plan(expire_after=2)  # every batch ends with only its first 2 requests run, the rest expired
    cfg = config(make_config, server, anth, tmp_path, on_expired=on_expired, max_resubmits=1)
    results, _ = run(cfg, reqs(4))
    assert [r.status for r in results] == ["ok"] * 4
    if on_expired == "resubmit":  # 2 answered + 2 expired; the 2 go in a second batch, which answers both
        assert anth.creates == 2 and live_calls(server) == []
        assert [len(c["body"]["requests"]) for c in anth.posts()] == [4, 2]
        assert sorted(s["final_status"] for s in states(cfg)) == ["completed", "expired"]
    else:
        assert anth.creates == 1 and len(live_calls(server)) == 2
        assert [s["final_status"] for s in states(cfg)] == ["expired"]


def test_a_batch_running_past_max_wait_stops_the_job_and_is_resumed(make_config, server, anth, tmp_path):
    anth.set_rules(ANSWERS)
    anth.set_plan(in_progress_polls=10**9)
    cfg = config(make_config, server, anth, tmp_path, max_wait_s=0.05)
    with pytest.raises(BatchStillRunning, match=r"batch msgbatch_fake_1 \(3 requests\) still in_progress .* "
                                                r"a rerun resumes it"):
        run(cfg, reqs(3))
    anth.set_plan(in_progress_polls=0)
    results, _ = run(cfg, reqs(3))  # the rerun polls the same batch to its end
    assert [r.status for r in results] == ["ok"] * 3
    assert anth.creates == 1 and len(anth.posts()) == 1 and live_calls(server) == []


def test_a_refused_create_stops_the_job_with_one_line(make_config, server, anth, tmp_path):
    from aura.llm.errors import FatalEndpointError

    anth.set_plan(create_status=403)
    with pytest.raises(FatalEndpointError) as err:
        run(config(make_config, server, anth, tmp_path), reqs(2))
    assert str(err.value) == ("endpoint 'fake': Message Batches API refused a request: HTTP 403: "
                              "PermissionDeniedError: batches: refused by the test plan")
    assert len(anth.posts()) == 1 and live_calls(server) == []


# --- a lost create answer: the batch is found by elimination, never made twice -----------------------------
def test_a_lost_create_answer_never_makes_a_second_batch(make_config, server, anth, tmp_path):
    anth.set_rules(ANSWERS)
    anth.add_batch(3, ended=True)  # another client's batches: same size but other custom_ids, and other sizes
    anth.add_batch(2)
    anth.add_batch(3, created=time.time() - 7200)  # same size, hours before: out of the time window
    anth.set_plan(create_500=1)  # the batch is made, then its answer is an HTTP 500
    results, _ = run(config(make_config, server, anth, tmp_path), reqs(3))
    assert [r.status for r in results] == ["ok"] * 3
    assert len(anth.posts()) == 1 and live_calls(server) == []  # found by elimination, not created again
    (state,) = states(config(make_config, server, anth, tmp_path))
    assert state["batch_id"] == "msgbatch_fake_4"


def test_two_batches_that_could_be_ours_stop_the_job_rather_than_guess(make_config, server, anth, tmp_path):
    anth.add_batch(3)  # an unclaimed in-progress batch of the same size, made just now
    anth.set_plan(create_500=1)
    with pytest.raises(StageFailed, match=r"batches msgbatch_fake_2, msgbatch_fake_1 each could be the one of "
                                          r"batch state \w+ .* write the right id as its batch_id"):
        run(config(make_config, server, anth, tmp_path), reqs(3))
    assert len(anth.posts()) == 1 and live_calls(server) == []


# --- a killed judge job resumes its batch ----------------------------------------------------------------


def _judge_setup(server, anth, tmp: Path) -> list[str]:
    raw = base_config(server.base_url, tmp / "cache", structured_output="none", batch="anthropic",
                      batch_base_url=anth.base_url)
    for m in raw["models"].values():
        m["params"] = dict(PARAMS)
    raw["paths"]["logs"] = str(tmp / "logs")
    raw["llm"] = {"batch": {"roles": ["judge"], "poll_s": 0.02, "poll_max_s": 0.02}}
    cfg = tmp / "judge.yaml"
    cfg.write_text(yaml.safe_dump(raw))
    return judge_command(cfg, tmp)


def test_killed_mid_poll_the_rerun_resumes_the_same_batch(server, anth, tmp_path):
    anth.set_rules([{"echo_schema_default": True}])  # the schema the judge prompt carries
    anth.set_plan(in_progress_polls=10**9)  # the first batch stays in progress
    cmd = _judge_setup(server, anth, tmp_path)
    out = tmp_path / "out" / "judgments.jsonl"
    proc = subprocess.Popen([*cmd, "--out", f"judgments={out}"], env=ENV, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while anth.polls_of("msgbatch_fake_1") < 3 and time.monotonic() < deadline:  # killed mid-poll
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(30)
    assert proc.returncode == -signal.SIGKILL and not out.exists()
    (state_file,) = (tmp_path / "batches").glob("*.json")
    state = json.loads(state_file.read_text())
    assert (state["status"], state["batch_id"], state["api"], len(state["keys"])) == \
        ("submitted", "msgbatch_fake_1", "anthropic", 4)

    anth.set_plan(in_progress_polls=1)
    done = subprocess.run([*cmd, "--out", f"judgments={out}"], env=ENV, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    # 3 axes = 3 batches in all: detection's (created before the kill, polled again, not resent) + 2 new
    assert anth.creates == 3 and len(anth.posts()) == 3 and anth.polls_of("msgbatch_fake_1") > 3
    assert live_calls(server) == []  # every judge call was a cache hit
    rows = list(read_jsonl(out))
    assert len(rows) == 12 and {r["status"] for r in rows} == {"ok"}
    assert {json.loads(f.read_text())["status"] for f in (tmp_path / "batches").glob("*.json")} == {"done"}


def test_a_state_written_before_a_kill_in_the_create_adopts_its_batch(make_config, server, anth, tmp_path):
    # as if killed between the create and the state's update: the state says submitting, no batch id
    anth.set_rules(ANSWERS)
    anth.set_plan(in_progress_polls=10**9)
    cfg = config(make_config, server, anth, tmp_path, max_wait_s=0.05)
    with pytest.raises(BatchStillRunning):
        run(cfg, reqs(3))
    (state_file,) = Path(cfg.paths["cache"]).parent.joinpath("batches").glob("*.json")
    state = json.loads(state_file.read_text())
    state_file.write_text(json.dumps({**state, "status": "submitting", "batch_id": None}))
    anth.add_batch(5)  # other batches made since: other sizes
    anth.set_plan(in_progress_polls=0)
    results, _ = run(cfg, reqs(3))
    assert [r.status for r in results] == ["ok"] * 3
    assert anth.creates == 1 and len(anth.posts()) == 1 and live_calls(server) == []  # adopted, not resent
    assert json.loads(state_file.read_text())["batch_id"] == "msgbatch_fake_1"


# --- config -----------------------------------------------------------------------------------------------
def test_batch_takes_true_false_openai_and_anthropic(tmp_path):
    for value, api in ((True, "openai"), ("openai", "openai"), ("anthropic", "anthropic"), (False, None)):
        cfg = validate_config(base_config("http://127.0.0.1:9", tmp_path / "cache", batch=value))
        assert cfg.endpoints["fake"].batch_api == api
    assert cfg.endpoints["fake"].batch_base_url is None
    with pytest.raises(ConfigError):
        validate_config(base_config("http://127.0.0.1:9", tmp_path / "cache", batch="gemini"))
