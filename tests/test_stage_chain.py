"""The workflow's stages run through the package CLI on the demo seeds against the fake server:
outputs, provenance sidecars, call logs, and no API key in any written file."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from aura.cli import main
from aura.io import read_jsonl
from conftest import REPO, base_config

SECRET = "sk-test-" + "S3CRET" * 6
ROLLOUT = "[AGENT_THOUGHT] The user asked for this; I will check first.\n[AGENT_ACTION] ListDevices: {}"


@pytest.fixture(scope="module")
def server(fake):
    """One fake server state for the whole module: the chain runs once, tests read its traces."""
    fake.reset()
    yield fake
    fake.reset()


@pytest.fixture(scope="module")
def chain(server, tmp_path_factory):
    mp = pytest.MonkeyPatch()
    mp.setenv("AURA_TEST_KEY", SECRET)
    tmp_path = tmp_path_factory.mktemp("chain")
    server.set_rules([
        {"match": {"contains": "Write the next [AGENT_THOUGHT]"}, "content": ROLLOUT},
        {"echo_schema_default": True},
    ])
    raw = base_config(server.base_url, tmp_path / "cache", api_key_env="AURA_TEST_KEY")
    raw["paths"]["seeds"] = str(REPO / "data/raw/demo_seeds")
    cfg_path = tmp_path / "config.yaml"
    cfg_path.write_text(yaml.safe_dump(raw))
    out = tmp_path / "out"
    logs = tmp_path / "logs"

    def run(stage, *args):
        assert main([stage, "--configfile", str(cfg_path), *args]) == 0

    run("select-seeds", "--in", f"seeds_dir={raw['paths']['seeds']}", "--out", f"seeds={out}/seeds.jsonl")
    run("tag-truncate", "--in", f"seeds={out}/seeds.jsonl", "--out", f"prefixes={out}/prefixes.jsonl")
    run("classify", "--in", f"seeds={out}/seeds.jsonl", "--in", f"prefixes={out}/prefixes.jsonl",
        "--out", f"classified={out}/classified.jsonl")
    run("finalize", "--in", f"seeds={out}/seeds.jsonl", "--in", f"classified={out}/classified.jsonl",
        "--out", f"dataset={out}/dataset.jsonl")
    for shard in (0, 1):
        run("rollout", "--model", "m", "--shard", f"{shard}/2", "--in", f"dataset={out}/dataset.jsonl",
            "--out", f"rollouts={out}/rollouts{shard}.jsonl", "--calls-log", f"{logs}/rollout{shard}.calls.jsonl")
        run("judge", "--model", "m", "--judge", "m", "--shard", f"{shard}/2", "--in", f"dataset={out}/dataset.jsonl",
            "--in", f"rollouts={out}/rollouts{shard}.jsonl", "--out", f"judgments={out}/judgments{shard}.jsonl",
            "--calls-log", f"{logs}/judge{shard}.calls.jsonl")
    run("panel", "--model", "m", "--in", f"rollouts_0={out}/rollouts0.jsonl", "--in", f"rollouts_1={out}/rollouts1.jsonl",
        "--in", f"judgments_0={out}/judgments0.jsonl", "--in", f"judgments_1={out}/judgments1.jsonl",
        "--out", f"panel={out}/panel.jsonl")
    run("model-rates", "--in", f"dataset={out}/dataset.jsonl", "--in", f"panel_0={out}/panel.jsonl",
        "--out", f"model_rates={out}/model_rates.csv")
    yield tmp_path, out
    mp.undo()


def test_chain_outputs(chain, server):
    _, out = chain
    seeds = list(read_jsonl(out / "seeds.jsonl"))
    dataset = list(read_jsonl(out / "dataset.jsonl"))
    assert len(seeds) == 10 and len(dataset) == 10
    r0, r1 = list(read_jsonl(out / "rollouts0.jsonl")), list(read_jsonl(out / "rollouts1.jsonl"))
    assert len(r0) + len(r1) == 10 and r0 and r1, "both shards get items"
    assert {r["item_id"] for r in r0}.isdisjoint({r["item_id"] for r in r1})
    assert all(r["status"] == "ok" and r["action"] == "ListDevices: {}" for r in r0 + r1)
    panel = list(read_jsonl(out / "panel.jsonl"))
    assert len(panel) == 10
    # the fake answers the first enum value: D0 / A0 / Safe, unanimous across the three judges
    assert {(p["detection"], p["action_type"], p["safety"]) for p in panel} == {("D0", "A0", "Safe")}
    rates = (out / "model_rates.csv").read_text()
    assert "all_rate" in rates and "safety_unresolved" in rates
    # 10 rollouts + 10 items x 3 axes x 1 judge job per shard
    assert server.stats()["count"] == 10 + 30


def test_evaluated_model_never_sees_rationale(chain, server):
    _, out = chain
    dataset = {d["item_id"]: d for d in read_jsonl(out / "dataset.jsonl")}
    rollout_bodies = [r["body"] for r in server.requests()
                      if "Write the next [AGENT_THOUGHT]" in r["body"]["messages"][-1]["content"]]
    assert len(rollout_bodies) == 10
    for body in rollout_bodies:
        text = json.dumps(body)
        assert not any(d["rationale"] in text for d in dataset.values())
        assert "NSP" not in text and "pair_label" not in text


def test_provenance_sidecars(chain):
    _, out = chain
    prov = json.loads((out / "judgments0.jsonl.prov.json").read_text())
    assert prov["stage"] == "judge" and len(prov["config_hash"]) == 64
    assert set(prov["git"]) == {"revision", "dirty"}
    assert {"judge_detection.v1", "judge_action_type.v1", "judge_safety.v1"} <= set(prov["prompts"])
    assert all(len(p["sha256"]) == 64 for p in prov["prompts"].values())
    assert prov["models"]["m"]["model_id"] == "fake-model" and prov["models"]["m"]["params"]["seed"] == 1
    assert prov["packages"]["openai"] and prov["packages"]["pandas"]
    thin = json.loads((out / "prefixes.jsonl.prov.json").read_text())
    assert thin["thin"] is True


def test_call_logs_record_tokens_and_prompt_hashes(chain):
    tmp, _ = chain
    calls = [c for f in sorted((tmp / "logs").glob("*.calls.jsonl")) for c in read_jsonl(f)]
    assert len(calls) == 40
    assert all(c["tokens_in"] > 0 and len(c["prompt_sha256"]) == 64 for c in calls)
    assert {c["prompt_name"] for c in calls} >= {"rollout_react.v1", "judge_safety.v1"}


def test_api_key_sent_but_never_written(chain, server):
    tmp, _ = chain
    assert any(r["headers"].get("authorization") == f"Bearer {SECRET}" for r in server.requests())
    written = [p for p in tmp.rglob("*") if p.is_file()]
    assert len(written) > 30  # outputs, sidecars, call logs, cache entries
    for path in written:
        assert SECRET not in path.read_text(errors="replace"), path


def test_rerun_with_warm_cache_makes_no_request(chain, server, monkeypatch):
    monkeypatch.setenv("AURA_TEST_KEY", SECRET)
    tmp, out = chain
    before = server.stats()["count"]
    cfg = str(tmp / "config.yaml")
    assert main(["rollout", "--configfile", cfg, "--model", "m", "--shard", "0/2", "--in", f"dataset={out}/dataset.jsonl",
                 "--out", f"rollouts={tmp}/again.jsonl"]) == 0
    assert server.stats()["count"] == before
    assert list(read_jsonl(tmp / "again.jsonl")) == list(read_jsonl(out / "rollouts0.jsonl"))
