"""The Batch API path (aura.llm.batch) against the fake server's /v1/files and /v1/batches: answers land in
the cache under the keys and in the entries a live call writes; a job killed mid-poll resumes its batch and
never submits twice; failed lines go live or fail their items; an expired batch keeps what it finished and
resubmits (or sends live) the rest. Also: cached prompt tokens and the batch discount in the cost."""
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

from aura.io import read_jsonl, write_jsonl
from aura.llm import Cache, LLMClient, LLMRequest
from aura.llm.accounting import Accounting
from conftest import REPO, base_config

ENV = {**os.environ, "PYTHONPATH": str(REPO / "src")}
SCHEMA = {"type": "object", "properties": {"rationale": {"type": "string"}, "label": {"enum": ["Safe", "Unsafe"]}},
          "required": ["rationale", "label"], "additionalProperties": False}
FAST = {"poll_s": 0.01, "poll_max_s": 0.02}


def reqs(n: int, schema=SCHEMA) -> list[LLMRequest]:
    return [LLMRequest(item_id=f"it{i}", messages=[{"role": "system", "content": "Rubric: label the action."},
                                                    {"role": "user", "content": f"action number {i}"}],
                       prompt_name="test.v1", prompt_sha256="0" * 64, schema=schema) for i in range(n)]


def batch_config(make_config, roles=("judge",), **options):
    return make_config({"llm": {"batch": {"roles": list(roles), **FAST, **options}}}, batch=True)


def run(cfg, requests, role="judge"):
    with LLMClient(cfg, Cache(cfg.paths["cache"]), Accounting(label="t", stream=io.StringIO())) as llm:
        return llm.run(role, "m", requests), llm.acc


def posts(server, path: str) -> list[dict]:
    return [r for r in server.requests() if r["path"] == path and r.get("method", "POST") == "POST"]


def entries(cache: Path) -> dict[str, dict]:
    return {p.stem: json.loads(p.read_text()) for p in cache.glob("*/*.json")}


def test_batch_answers_are_the_entries_a_live_call_writes(make_config, server, tmp_path):
    server.set_rules([{"match": {"contains": "number 1"}, "json": {"rationale": "r1", "label": "Unsafe"}},
                      {"echo_schema_default": True}])
    cfg = batch_config(make_config)
    results, acc = run(cfg, reqs(3))
    assert [r.status for r in results] == ["ok"] * 3
    assert [r.parsed["label"] for r in results] == ["Safe", "Unsafe", "Safe"]
    # one upload, one batch, no live call: the stage's calls were cache hits
    assert len(posts(server, "/v1/files")) == 1 and len(posts(server, "/v1/batches")) == 1
    assert posts(server, "/v1/chat/completions") == []
    assert acc.calls == 3 and acc.cache_hits == 3  # 3 batch answers, then 3 hits
    batched = entries(Path(cfg.paths["cache"]))

    server.reset()  # the same requests live, into a fresh cache
    server.set_rules([{"match": {"contains": "number 1"}, "json": {"rationale": "r1", "label": "Unsafe"}},
                      {"echo_schema_default": True}])
    live_cfg = make_config({"paths": {**cfg.raw["paths"], "cache": str(tmp_path / "live_cache")}})
    live_results, _ = run(live_cfg, reqs(3))
    live = entries(tmp_path / "live_cache")
    assert sorted(batched) == sorted(live) and len(live) == 3  # the same keys
    for key in live:  # the same request, answer text, finish reason and usage; only ids and times differ
        assert batched[key]["request"] == live[key]["request"]
        for field in ("text", "finish_reason", "usage", "tool_calls", "model"):
            assert batched[key]["response"][field] == live[key]["response"][field]
        assert set(batched[key]) == set(live[key]) and set(batched[key]["response"]) == set(live[key]["response"])
    assert [r.parsed for r in results] == [r.parsed for r in live_results]


def test_roles_not_listed_and_multi_turn_calls_stay_live(make_config, server):
    server.set_rules([{"echo_schema_default": True}])
    cfg = batch_config(make_config, roles=["reviewer"])
    run(cfg, reqs(2), role="judge")  # judge is not in llm.batch.roles
    assert posts(server, "/v1/batches") == [] and len(posts(server, "/v1/chat/completions")) == 2
    server.reset()
    server.set_rules([{"echo_schema_default": True}])
    multi = [LLMRequest(item_id="x", messages=[{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"},
                                               {"role": "user", "content": "again"}], prompt_name="t", prompt_sha256="0")]
    run(cfg, multi, role="reviewer")  # a re-ask carries an earlier answer: never batched
    assert posts(server, "/v1/batches") == [] and len(posts(server, "/v1/chat/completions")) == 1


@pytest.mark.parametrize("on_failure", ["live", "failed"])
def test_failed_lines_go_live_or_fail_their_items(make_config, server, on_failure):
    # the line of item 1 gets a 500 inside the batch (once); everything else is answered
    server.set_rules([{"match": {"contains": "number 1"}, "status": 500, "times": 1}, {"echo_schema_default": True}])
    cfg = batch_config(make_config, on_failure=on_failure)
    results, acc = run(cfg, reqs(3))
    live_calls = posts(server, "/v1/chat/completions")
    if on_failure == "live":
        assert [r.status for r in results] == ["ok"] * 3
        assert len(live_calls) == 1 and "number 1" in json.dumps(live_calls[0]["body"])
    else:
        assert [r.status for r in results] == ["ok", "failed", "ok"] and live_calls == []
        assert results[1].error.startswith("batch batch_fake_") and "500" in results[1].error
    assert len(posts(server, "/v1/batches")) == 1


@pytest.mark.parametrize("on_expired", ["resubmit", "live"])
def test_expired_batch_keeps_its_answers_and_sends_the_rest(make_config, server, on_expired):
    server.set_rules([{"echo_schema_default": True}])
    server.set_batch_plan(expire_after=2)  # every batch expires after answering its first 2 lines
    cfg = batch_config(make_config, on_expired=on_expired, max_resubmits=1)
    results, _ = run(cfg, reqs(4))
    assert [r.status for r in results] == ["ok"] * 4
    uploads = [r for r in server.requests() if r["path"].endswith("/content")]  # downloads of output files
    assert uploads  # the expired batch's output was read
    if on_expired == "resubmit":
        # 4 lines: 2 answered + 2 expired; the 2 go in a second batch, which answers both (its first 2 lines)
        assert len(posts(server, "/v1/batches")) == 2 and posts(server, "/v1/chat/completions") == []
    else:
        assert len(posts(server, "/v1/batches")) == 1 and len(posts(server, "/v1/chat/completions")) == 2


def test_a_rerun_after_a_finished_batch_submits_nothing(make_config, server):
    server.set_rules([{"echo_schema_default": True}])
    cfg = batch_config(make_config)
    run(cfg, reqs(2))
    run(cfg, reqs(2))  # everything cached: no batch, no call
    run(cfg, reqs(3))  # one new request: a batch of that one only
    assert len(posts(server, "/v1/batches")) == 2 and posts(server, "/v1/chat/completions") == []
    states = [json.loads(p.read_text()) for p in (Path(cfg.paths["cache"]).parent / "batches").glob("*.json")]
    assert sorted(len(s["keys"]) for s in states) == [1, 2] and {s["status"] for s in states} == {"done"}


def test_cost_reads_cached_tokens_and_batch_discount(make_config, server, tmp_path):
    # user message of 400 chars -> fake prompt_tokens = 400 // 4 = 100; answer "ok" -> 1 completion token
    server.set_rules([{"content": "ok", "cached_tokens": 60}])
    price = {"input_per_mtok": 1.0, "output_per_mtok": 2.0, "cached_input": 0.1}
    one = [LLMRequest(item_id="a", messages=[{"role": "user", "content": "x" * 400}], prompt_name="t", prompt_sha256="0")]
    models = base_config(server.base_url, tmp_path)["models"]
    models["m"] = {"endpoint": "fake", "model_id": "fake-model", "params": {}, "price": price}
    cfg = make_config({"models": models})
    (res,), _ = run(cfg, one)
    (rec,) = res.calls
    # live: 40 uncached x $1 + 60 cached x $0.1 + 1 out x $2 = 48 USD per 1M calls
    assert (rec.tokens_in, rec.tokens_cached, rec.tokens_out) == (100, 60, 1)
    assert rec.cost_usd == pytest.approx(48e-6)

    server.reset()
    server.set_rules([{"content": "ok", "cached_tokens": 60}])
    bcfg = make_config({"models": models,
                        "paths": {**cfg.raw["paths"], "cache": str(tmp_path / "bcache")},
                        "llm": {"batch": {"roles": ["judge"], **FAST}}}, batch=True)
    (res,), acc = run(bcfg, one)
    batch_rec = next(r for r in acc.records if not r.cache_hit)
    # batch: the same 48 at the default 50% discount = 24; the stage's own call is then a free cache hit
    assert batch_rec.batch_id and batch_rec.cost_usd == pytest.approx(24e-6)
    assert res.calls[0].cache_hit and res.calls[0].cost_usd == 0
    assert acc.cost_usd == pytest.approx(24e-6)


def test_requests_over_max_requests_are_split_over_batches(make_config, server):
    server.set_rules([{"echo_schema_default": True}])
    cfg = batch_config(make_config, max_requests=2)
    results, _ = run(cfg, reqs(5))
    assert [r.status for r in results] == ["ok"] * 5
    # 5 lines, at most 2 a batch: 2 + 2 + 1 = 3 batches, no live call
    assert len(posts(server, "/v1/batches")) == 3 and posts(server, "/v1/chat/completions") == []


def test_a_batch_running_past_max_wait_stops_the_job_and_is_resumed(make_config, server):
    from aura.llm.batch import BatchStillRunning

    server.set_rules([{"echo_schema_default": True}])
    server.set_batch_plan(in_progress_polls=10**9)
    cfg = batch_config(make_config, max_wait_s=0.05)
    with pytest.raises(BatchStillRunning, match=r"batch batch_fake_2 \(3 requests\) still in_progress .* a rerun resumes it"):
        run(cfg, reqs(3))
    server.set_batch_plan(in_progress_polls=0)
    results, _ = run(cfg, reqs(3))  # the rerun polls the same batch to its end
    assert [r.status for r in results] == ["ok"] * 3
    assert len(posts(server, "/v1/batches")) == 1 and posts(server, "/v1/chat/completions") == []


# --- a killed judge job resumes its batch -------------------------------------------------------------
ROLLOUT = {"thought": "Check first.", "action": "ListDevices: {}", "status": "ok"}


def _judge_setup(server, tmp: Path, cache: str, batch: bool) -> list[str]:
    raw = base_config(server.base_url, tmp / cache, batch=batch)
    raw["paths"]["logs"] = str(tmp / "logs")
    if batch:  # a poll every 20 ms, for ever until the plan lets the batch finish
        raw["llm"] = {"batch": {"roles": ["judge"], "poll_s": 0.02, "poll_max_s": 0.02}}
    cfg = tmp / f"{cache}.yaml"
    cfg.write_text(yaml.safe_dump(raw))
    return judge_command(cfg, tmp)


def judge_command(cfg: Path, tmp: Path) -> list[str]:
    """`aura judge` of model m by judge m over 4 items (dataset and rollouts written under tmp)."""
    write_jsonl(tmp / "dataset.jsonl", [
        {"item_id": f"item{i}", "profile": "You are a home assistant.", "model_input": f"[USER] switch off D{i}",
         "rationale": "the fridge must stay on"} for i in range(4)])
    write_jsonl(tmp / "rollouts.jsonl", [{"item_id": f"item{i}", "model": "m", **ROLLOUT} for i in range(4)])
    return [sys.executable, "-m", "aura", "judge", "--configfile", str(cfg), "--model", "m", "--judge", "m",
            "--in", f"dataset={tmp}/dataset.jsonl", "--in", f"rollouts={tmp}/rollouts.jsonl"]


def _ok(cmd: list[str]) -> None:
    done = subprocess.run(cmd, env=ENV, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]


def test_killed_mid_poll_the_rerun_resumes_the_same_batch(server, tmp_path):
    server.set_rules([{"echo_schema_default": True}])
    server.set_batch_plan(in_progress_polls=10**9)  # the first batch stays in progress
    cmd = _judge_setup(server, tmp_path, "cache", batch=True)
    out = tmp_path / "out" / "judgments.jsonl"
    proc = subprocess.Popen([*cmd, "--out", f"judgments={out}"], env=ENV, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    states = tmp_path / "batches"  # llm.batch.state_dir default: next to the cache folder
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # killed once it has polled its batch a few times
        polled = [r for r in server.requests() if r["path"].startswith("/v1/batches/")]
        if len(polled) >= 3:
            break
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(30)
    assert proc.returncode == -signal.SIGKILL and not out.exists()
    (state_file,) = states.glob("*.json")
    state = json.loads(state_file.read_text())
    assert state["status"] == "submitted" and state["batch_id"] == "batch_fake_2" and len(state["keys"]) == 4

    # killed between batches.create and the state write: the rerun finds the batch by its metadata
    state_file.write_text(json.dumps({**state, "status": "submitting", "batch_id": None}))
    server.set_batch_plan(in_progress_polls=1)
    _ok([*cmd, "--out", f"judgments={out}"])
    creates = posts(server, "/v1/batches")
    # 3 axes = 3 batches in all: detection's (created before the kill, resumed) + action type + safety
    assert len(creates) == 3 and len(posts(server, "/v1/files")) == 3
    assert posts(server, "/v1/chat/completions") == []
    rows = list(read_jsonl(out))
    assert len(rows) == 12 and {r["status"] for r in rows} == {"ok"}

    # the same job live (fresh cache, no batch) writes the same rows
    server.reset()
    server.set_rules([{"echo_schema_default": True}])
    live = _judge_setup(server, tmp_path, "live_cache", batch=False)
    _ok([*live, "--out", f"judgments={tmp_path}/live.jsonl"])
    assert list(read_jsonl(tmp_path / "live.jsonl")) == rows
    assert sorted(entries(tmp_path / "live_cache")) == sorted(entries(tmp_path / "cache"))


# --- the Batch API's own calls: one line on errors, never two batches, tokens counted once ---------------
def test_a_refused_upload_stops_the_job_with_one_line_and_writes_nothing(make_config, server, tmp_path):
    from aura.llm.errors import FatalEndpointError

    server.set_rules([{"echo_schema_default": True}])
    server.set_batch_plan(upload_status=401)
    cfg = batch_config(make_config)
    with pytest.raises(FatalEndpointError) as err:
        run(cfg, reqs(2))
    assert str(err.value) == ("endpoint 'fake': Batch API refused a request: HTTP 401: AuthenticationError: "
                              "files: refused by the test plan")
    assert entries(Path(cfg.paths["cache"])) == {} and posts(server, "/v1/chat/completions") == []


def test_a_lost_create_response_never_makes_a_second_batch(make_config, server):
    server.set_rules([{"echo_schema_default": True}])
    server.set_batch_plan(create_500=1)  # the batch is made, then its response is an HTTP 500
    results, _ = run(batch_config(make_config), reqs(3))
    assert [r.status for r in results] == ["ok"] * 3
    # one create only: after the 500 the job found its batch by metadata instead of creating another
    assert len(posts(server, "/v1/batches")) == 1 and posts(server, "/v1/chat/completions") == []


def test_a_killed_jobs_batch_is_found_past_the_first_page(make_config, server):
    import openai

    server.set_rules([{"echo_schema_default": True}])
    server.set_batch_plan(in_progress_polls=10**9)
    cfg = batch_config(make_config, max_wait_s=0.05)
    from aura.llm.batch import BatchStillRunning
    with pytest.raises(BatchStillRunning):
        run(cfg, reqs(3))
    (state_file,) = Path(cfg.paths["cache"]).parent.joinpath("batches").glob("*.json")
    state = json.loads(state_file.read_text())  # as if killed between batches.create and the state write
    state_file.write_text(json.dumps({**state, "status": "submitting", "batch_id": None}))
    api = openai.OpenAI(base_url=server.base_url, api_key="x")
    upload = api.files.create(file=("other.jsonl", b"", "application/jsonl"), purpose="batch")
    for _ in range(120):  # other jobs' batches, all newer than ours: ours is on the second page
        api.batches.create(input_file_id=upload.id, endpoint="/v1/chat/completions", completion_window="24h")
    server.set_batch_plan(in_progress_polls=0)
    results, _ = run(cfg, reqs(3))
    assert [r.status for r in results] == ["ok"] * 3
    assert len(posts(server, "/v1/batches")) == 1 + 120 and posts(server, "/v1/chat/completions") == []


def test_a_batch_answer_counts_its_tokens_once(make_config, server, tmp_path):
    server.set_rules([{"echo_schema_default": True}])
    _, batched = run(batch_config(make_config), reqs(3))
    server.reset()
    server.set_rules([{"echo_schema_default": True}])
    _, live = run(make_config({"paths": {**make_config().raw["paths"], "cache": str(tmp_path / "live")}}), reqs(3))
    assert live.tokens_in > 0 and (batched.tokens_in, batched.tokens_out) == (live.tokens_in, live.tokens_out)


def test_gemini_batch_lines_meet_its_profile_like_live_calls(make_config, server):
    """Gemini's OpenAI layer through the Batch API (paper.yaml's google endpoint: batch: true): the lines are
    answered as the gemini-openai-layer profile answers live calls. A thinking model's line reports its thinking
    as reasoning tokens, which the record counts and prices at the batch discount; a line the provider refuses
    (Gemini 2.5 Pro cannot turn thinking off: reasoning_effort none) fails its item with the provider's message."""
    server.set_profile("gemini-openai-layer")
    try:
        server.set_rules([{"echo_schema_default": True}])
        raw = {"llm": {"batch": {"roles": ["judge"], **FAST, "on_failure": "failed"}}}
        cfg = make_config(raw, batch=True)
        cfg.models["m"].model_id = "gemini-2.5-pro"
        results, acc = run(cfg, reqs(2))
        assert [r.status for r in results] == ["ok", "ok"] and posts(server, "/v1/chat/completions") == []
        batch_records = [c for c in acc.records if c.batch_id]
        assert len(batch_records) == 2 and all(c.tokens_reasoning and c.tokens_reasoning > 0 for c in batch_records)
        price = cfg.models["m"].price
        for c in batch_records:  # the reasoning tokens are inside tokens_out, priced once, at half price
            assert c.tokens_out > c.tokens_reasoning
            assert c.cost_usd == pytest.approx(price.cost(c.tokens_in, c.tokens_out, c.tokens_cached, batch=True))
        refused = [LLMRequest(**{**r.__dict__, "params": {"reasoning_effort": "none"}}) for r in reqs(1)]
        (res,), _ = run(cfg, refused)
        assert res.status == "failed" and "Budget 0 is invalid. This model only works in thinking mode." in res.error
    finally:
        server.set_profile("ideal")
