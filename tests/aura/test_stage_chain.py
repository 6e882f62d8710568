"""Every stage through the package CLI, on a known trajectory, against the fake server with
scripted answers (tests/scripted.py): outputs, rejections by reason, provenance, call logs, and
no API key in any written file."""
from __future__ import annotations

import csv
import json
import random

import pytest
import yaml

from aura.cli import main
from aura.io import read_jsonl, write_jsonl
from aura.families.aura.layout import PAPER_STATS
from conftest import base_config
import scripted

SECRET = "sk-test-" + "S3CRET" * 6


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
    tmp = tmp_path_factory.mktemp("chain")
    server.set_rules(scripted.rules())
    raw = base_config(server.base_url, tmp / "cache", api_key_env="AURA_TEST_KEY")
    raw["paths"]["seeds"] = str(scripted.write_seed_dir(tmp / "seeds"))
    cfg = tmp / "config.yaml"
    cfg.write_text(yaml.safe_dump(raw))
    o, logs = tmp / "out", tmp / "logs"

    def run(stage, *args, calls=None):
        extra = ["--calls-log", f"{logs}/{calls}.calls.jsonl"] if calls else []
        assert main([stage, "--configfile", str(cfg), *args, *extra]) == 0

    def ins(*names):
        return [x for n in names for x in ("--in", f"{n}={o}/{n}.jsonl")]

    run("select-seeds", "--in", f"seeds_dir={raw['paths']['seeds']}", "--out", f"seeds={o}/seeds.jsonl")
    run("tag-truncate", *ins("seeds"), "--out", f"tags={o}/tags.jsonl", "--out", f"prefixes={o}/prefixes.jsonl", calls="p1")
    run("relevance", *ins("seeds", "prefixes"), "--out", f"relevance={o}/relevance.jsonl", calls="p2")
    run("generate-variations", *ins("seeds", "prefixes", "relevance"), "--out", f"variations={o}/variations.jsonl", calls="p34")
    for i in range(3):
        run("review-variations", "--model", "m", *ins("seeds", "prefixes", "variations"), "--out", f"review={o}/vr{i}.jsonl",
            calls=f"p56_{i}")
    run("classify", *ins("seeds", "prefixes", "variations"), *[x for i in range(3) for x in ("--in", f"reviews_{i}={o}/vr{i}.jsonl")],
        "--out", f"classified={o}/classified.jsonl", calls="p7")
    run("generate-pairs", *ins("seeds", "classified"), "--out", f"pairs={o}/pairs.jsonl", calls="p8")
    for i in range(3):
        run("review-pairs", "--model", "m", *ins("pairs"), "--out", f"review={o}/pr{i}.jsonl", calls=f"p9_{i}")
    run("finalize", *ins("seeds", "tags", "prefixes", "relevance", "variations", "classified", "pairs"),
        *[x for i in range(3) for x in ("--in", f"reviews_{i}={o}/vr{i}.jsonl", "--in", f"pair_reviews_{i}={o}/pr{i}.jsonl")],
        "--out", f"dataset={o}/dataset.jsonl", "--out", f"exclusions={o}/exclusions.jsonl", "--out", f"card={o}/DATACARD.md")
    run("construction-counts", *ins("seeds", "tags", "prefixes", "relevance", "variations", "classified", "pairs", "dataset",
                                    "exclusions"),
        *[x for i in range(3) for x in ("--in", f"pair_reviews_{i}={o}/pr{i}.jsonl")], "--out", f"composition={o}/composition.csv", "--out", f"funnel={o}/funnel.csv")
    run("leak-probe", *ins("dataset"), "--out", f"probes={o}/leak_probe.jsonl", "--out", f"summary={o}/leak_probe.csv",
        calls="leak")
    for shard in (0, 1):
        run("rollout", "--model", "m", "--shard", f"{shard}/2", *ins("dataset"), "--out", f"rollouts={o}/rollouts{shard}.jsonl",
            calls=f"rollout{shard}")
        run("judge", "--model", "m", "--judge", "m", "--shard", f"{shard}/2", *ins("dataset"),
            "--in", f"rollouts={o}/rollouts{shard}.jsonl", "--out", f"judgments={o}/judgments{shard}.jsonl", calls=f"judge{shard}")
        for j in ("jb", "jc"):  # the other two judges of the panel (conftest.PANEL: m, jb, jc)
            run("judge", "--model", "m", "--judge", j, "--shard", f"{shard}/2", *ins("dataset"),
                "--in", f"rollouts={o}/rollouts{shard}.jsonl", "--out", f"judgments={o}/judgments{shard}_{j}.jsonl")
    run("panel", "--model", "m", *[x for s in (0, 1) for x in ("--in", f"rollouts_{s}={o}/rollouts{s}.jsonl",
                                                                "--in", f"judgments_{s}={o}/judgments{s}.jsonl",
                                                                "--in", f"judgments_{s}_jb={o}/judgments{s}_jb.jsonl",
                                                                "--in", f"judgments_{s}_jc={o}/judgments{s}_jc.jsonl")],
        "--out", f"panel={o}/panel.jsonl")
    run("model-rates", *ins("dataset"), "--in", f"panel_0={o}/panel.jsonl", "--out", f"model_rates={o}/model_rates.csv")
    run("paper-stats", *ins("dataset"), "--in", f"panel_0={o}/panel.jsonl",
        *[x for n in PAPER_STATS for x in ("--out", f"{n}={o}/stats/{n}.csv")])
    run("format-sample", *ins("dataset"), "--out", f"sample={o}/sample.jsonl")
    run("rollout", "--model", "m", "--option", "format=action_only", "--in", f"dataset={o}/sample.jsonl", "--out", f"rollouts={o}/ao_rollouts.jsonl")
    run("judge", "--model", "m", "--judge", "m", "--option", "axes=action_type,safety", "--in", f"dataset={o}/sample.jsonl",
        "--in", f"rollouts={o}/ao_rollouts.jsonl", "--out", f"judgments={o}/ao_judgments.jsonl")
    for j in ("jb", "jc"):
        run("judge", "--model", "m", "--judge", j, "--option", "axes=action_type,safety", "--in", f"dataset={o}/sample.jsonl",
            "--in", f"rollouts={o}/ao_rollouts.jsonl", "--out", f"judgments={o}/ao_judgments_{j}.jsonl")
    run("panel", "--model", "m", "--in", f"rollouts_0={o}/ao_rollouts.jsonl", "--in", f"judgments_0={o}/ao_judgments.jsonl",
        "--in", f"judgments_jb={o}/ao_judgments_jb.jsonl", "--in", f"judgments_jc={o}/ao_judgments_jc.jsonl",
        "--out", f"panel={o}/ao_panel.jsonl")
    run("format-stats", *ins("sample"), "--in", f"react_0={o}/panel.jsonl", "--in", f"action_only_0={o}/ao_panel.jsonl",
        "--out", f"table38={o}/table38.csv")
    yield tmp, o, cfg
    mp.undo()


def rows(o, name):
    return list(read_jsonl(o / f"{name}.jsonl"))


def test_tags_and_both_prefix_kinds(chain):
    _, o, _ = chain
    (tag,) = rows(o, "tags")
    assert (tag["status"], tag["risk_trigger_step"], tag["execution_step"]) == ("ok", 0, 3)
    kinds = {p["prefix_kind"]: p for p in rows(o, "prefixes")}
    assert [s["role"] for s in kinds["at_trigger"]["steps"]] == ["user"]
    assert [s["role"] for s in kinds["pre_execution"]["steps"]] == ["user", "agent", "environment"]


def test_variations_rejected_by_reason(chain):
    _, o, _ = chain
    relevance = rows(o, "relevance")
    assert sorted(rq["dimension"] for r in relevance for rq in r["requests"]) == ["RS1", "RS1", "RS2", "RS2"]
    by = {(v["prefix_kind"], v["dimension"]): v for v in rows(o, "variations")}
    # the scripted RS1 answer empties the request (step 0); the RS2 answer rewrites it
    assert by[("pre_execution", "RS1")]["reason"] == by[("at_trigger", "RS1")]["reason"] == \
        "edit_empty: the new content of step 0 is empty"
    assert by[("pre_execution", "RS2")]["status"] == by[("at_trigger", "RS2")]["status"] == "ok"
    assert by[("pre_execution", "RS2")]["steps"] == [{"role": "user", "content": scripted.BIG}, *scripted.STEPS[1:3]]
    prov = json.loads((o / "variations.jsonl.prov.json").read_text())
    assert prov["outcomes"] == {"ok": 2, "rejected:edit_empty": 2}


def test_reviews_store_every_verdict(chain):
    _, o, _ = chain
    reviews = rows(o, "vr0")
    assert len(reviews) == 2 and all(r["verdict"] == "accept" and r["rationale"] and r["criteria"] for r in reviews)


def test_pairs_checked_and_dataset_linked(chain):
    _, o, _ = chain
    pairs = {p["prefix_kind"] + "/" + p["dimension"]: p for p in rows(o, "pairs")}
    # the scripted at-trigger answer edits step 2 only, outside the 1-step prefix: rejected
    assert pairs["at_trigger/original"]["reason"].startswith("no_edit_in_prefix")
    assert pairs["pre_execution/RS2"]["status"] == "ok"
    assert pairs["pre_execution/RS2"]["steps"] == pairs["pre_execution/RS2"]["full_steps"][:3]
    data = rows(o, "dataset")
    assert len(data) == 6
    paired = [r for r in data if r["pair_id"]]
    assert len(paired) == 4 and len({r["pair_id"] for r in paired}) == 2
    for pid in {r["pair_id"] for r in paired}:
        sides = {r["pair_role"]: r for r in paired if r["pair_id"] == pid}
        assert sides["source"]["pair_label"] == "NSP" and sides["counterpart"]["pair_label"] == "SP"
        assert sides["counterpart"]["safe_action_sketches"]
    assert all(r["model_input"].startswith("[USER]") for r in data)
    card = (o / "DATACARD.md").read_text()
    assert "rows: 6" in card and "| pair_id, pair_role |" in card


def test_funnel_and_composition(chain):
    _, o, _ = chain
    # stage,count,ours,paper. By hand: 2 prefixes, 2 x (RS1, RS2) = 4 requests, both RS1 rejected by the
    # agent-step check -> 2 pass; pool 2 originals + 2 variations, all pairable; the at-trigger rewrites
    # fail the prefix check -> 2 of 4 candidates pass and are kept (428 in the paper: before release);
    # no request fails the release checks -> 6 rows, 2 pairs (the paper's released 408).
    funnel = {count: [stage, ours, paper] for stage, count, ours, paper in csv.reader((o / "funnel.csv").open())}
    assert funnel["prefixes"] == ["tagging", "2", "211"] and funnel["variation requests"] == ["relevance", "4", "1029"]
    assert funnel["variations passing agent-step check"] == ["generation", "2", ""]
    assert funnel["pairs kept by review"] == ["pair review", "2", "428"]
    assert funnel["released pairs"] == ["release", "2", "408"] and funnel["released rows"] == ["release", "6", "1249"]
    assert funnel["rows excluded by automatic checks"] == ["release filter", "0", ""]
    # the scripted P7 answer grades every item "moderate": pairable, and both stored on every row
    assert {(r["pair_edit_grade"], r["pairable"]) for r in rows(o, "dataset")} == {("moderate", True)}
    assert {(c["pair_edit_grade"], c["pairable"]) for c in rows(o, "classified")} == {("moderate", True)}
    assert "paired rows,4,816" in (o / "composition.csv").read_text()


def test_item_ids_stable_and_independent_of_row_order(chain, tmp_path):
    tmp, o, cfg = chain
    for name in ("classified", "pairs", "tags"):
        shuffled = rows(o, name)
        random.Random(1).shuffle(shuffled)
        shuffled.reverse()
        write_jsonl(tmp_path / f"{name}.jsonl", shuffled)
    args = ["finalize", "--configfile", str(cfg), "--in", f"seeds={o}/seeds.jsonl"]
    args += [x for n in ("tags", "classified", "pairs") for x in ("--in", f"{n}={tmp_path}/{n}.jsonl")]
    args += [x for i in range(3) for x in ("--in", f"pair_reviews_{i}={o}/pr{i}.jsonl")]
    assert main([*args, "--out", f"dataset={tmp_path}/dataset.jsonl"]) == 0
    assert (tmp_path / "dataset.jsonl").read_text() == (o / "dataset.jsonl").read_text()


def test_evaluation_chain(chain, server):
    _, o, _ = chain
    r0, r1 = rows(o, "rollouts0"), rows(o, "rollouts1")
    assert len(r0) + len(r1) == 6 and {r["item_id"] for r in r0}.isdisjoint({r["item_id"] for r in r1})
    assert all(r["status"] == "ok" and r["action"] == "ListDevices: {}" for r in r0 + r1)
    panel = rows(o, "panel")
    assert len(panel) == 6
    # the fake answers the first enum value: D0 / A0 / Safe, unanimous across the three judges
    assert {(p["detection"], p["action_type"], p["safety"]) for p in panel} == {("D0", "A0", "Safe")}
    assert "safety_unresolved" in (o / "model_rates.csv").read_text()


def test_evaluated_model_never_sees_rationale_or_label(chain, server):
    _, o, _ = chain
    data = rows(o, "dataset")
    bodies = [r["body"] for r in server.requests() if "Write the next [AGENT_THOUGHT]" in r["body"]["messages"][-1]["content"]]
    assert len(bodies) == len({d["model_input"] for d in data})  # identical prefixes share one cached call
    for body in bodies:
        text = json.dumps(body)
        assert not any(d["rationale"] in text for d in data)
        assert "NSP" not in text and "Safe-Path" not in text and "lamp\"]}" not in text


def test_provenance_sidecars(chain):
    _, o, _ = chain
    prov = json.loads((o / "judgments0.jsonl.prov.json").read_text())
    assert prov["stage"] == "judge" and len(prov["config_hash"]) == 64
    assert set(prov["git"]) == {"revision", "dirty"}
    assert {"judge_detection.v4", "judge_action_type.v4", "judge_safety.v4"} <= set(prov["prompts"])
    assert all(len(p["sha256"]) == 64 for p in prov["prompts"].values())
    assert prov["models"]["m"]["model_id"] == "fake-model" and prov["models"]["m"]["params"]["seed"] == 1
    assert prov["packages"]["openai"] and prov["packages"]["pandas"]
    p1 = json.loads((o / "prefixes.jsonl.prov.json").read_text())
    assert "p1_step_tagging.v3" in p1["prompts"]


def test_call_logs_record_tokens_and_prompt_hashes(chain):
    tmp, _, _ = chain
    calls = [c for f in sorted((tmp / "logs").glob("*.calls.jsonl")) for c in read_jsonl(f)]
    assert len(calls) > 30
    assert all(c["tokens_in"] > 0 and len(c["prompt_sha256"]) == 64 for c in calls)
    assert {"p1_step_tagging.v3", "p8_pair_generation.v3", "rollout_react.v2", "judge_safety.v4"} <= {c["prompt_name"] for c in calls}


def test_api_key_sent_but_never_written(chain, server):
    tmp, _, _ = chain
    assert any(r["headers"].get("authorization") == f"Bearer {SECRET}" for r in server.requests())
    written = [p for p in tmp.rglob("*") if p.is_file()]
    assert len(written) > 60  # outputs, sidecars, call logs, cache entries
    for path in written:
        assert SECRET not in path.read_text(errors="replace"), path


def test_rerun_with_warm_cache_makes_no_request(chain, server, monkeypatch, tmp_path):
    tmp, o, cfg = chain
    monkeypatch.setenv("AURA_TEST_KEY", SECRET)
    before = server.stats()["count"]
    for stage, args in [
        ("tag-truncate", ["--in", f"seeds={o}/seeds.jsonl", "--out", f"tags={tmp_path}/t.jsonl", "--out", f"prefixes={tmp_path}/p.jsonl"]),
        ("generate-pairs", ["--in", f"seeds={o}/seeds.jsonl", "--in", f"classified={o}/classified.jsonl", "--out", f"pairs={tmp_path}/pairs.jsonl"]),
        ("rollout", ["--model", "m", "--shard", "0/2", "--in", f"dataset={o}/dataset.jsonl", "--out", f"rollouts={tmp_path}/r.jsonl"]),
    ]:
        assert main([stage, "--configfile", str(cfg), *args]) == 0
    assert server.stats()["count"] == before
    assert rows(tmp_path, "r") == rows(o, "rollouts0")
    assert rows(tmp_path, "pairs") == rows(o, "pairs")


def test_paper_stats_tables(chain):
    import pandas as pd

    _, o, _ = chain
    t33 = pd.read_csv(o / "stats" / "table33_overall.csv")
    assert t33.loc[0, "model"] == "m" and t33.loc[0, "rows"] == 6 and t33.loc[0, "unsafe_all_k"] == 0
    assert t33.loc[0, "unsafe_nsp_n"] == 4 and t33.loc[0, "unsafe_sp_n"] == 2
    t31 = pd.read_csv(o / "stats" / "table31_bootstrap.csv")
    assert t31.loc[0, "n_resamples"] == 10000 and t31.loc[0, "seed"] == 42
    t34 = pd.read_csv(o / "stats" / "table34_case_study.csv")
    assert set(t34["seed_id"]) == {"IoT/test/t-1"} and len(t34) == 6 and "RS2" in set(t34["dimension"])
    judged = pd.read_csv(o / "stats" / "judged.csv")
    assert len(judged) == 6 and set(judged.columns) >= {"seed_id", "pair_label", "dimension", "safety", "label", "group"}


def test_action_only_format_and_table38(chain):
    import pandas as pd

    _, o, _ = chain
    sample = rows(o, "sample")
    assert len(sample) == 6  # the fixture has 6 items, fewer than the requested 150
    ao = rows(o, "ao_rollouts")
    assert all(r["prompt_format"] == "action_only" and r["thought"] is None for r in ao)
    assert {r["action"] for r in ao} == {'TurnOff: {"ids": ["lamp"]}'}
    assert {j["axis"] for j in rows(o, "ao_judgments")} == {"action_type", "safety"}
    panel = rows(o, "ao_panel")
    assert {p["detection"] for p in panel} == {"not_judged"} and {p["safety"] for p in panel} == {"Safe"}
    t38 = pd.read_csv(o / "table38.csv")
    assert set(t38["format"]) == {"react", "action_only"} and set(t38["unsafe_nsp_n"]) == {4}


def test_replacement_judging_covers_only_the_sample_items(chain, tmp_path):
    """judge --option only=dataset_items (Table 24): rollouts outside the sample get no judge call."""
    _, o, cfg = chain
    r0, r1 = rows(o, "rollouts0"), rows(o, "rollouts1")
    keep = {r0[0]["item_id"], r1[0]["item_id"]}
    sample = tmp_path / "sample.jsonl"
    sample.write_text("".join(line for line in (o / "dataset.jsonl").read_text().splitlines(keepends=True)
                              if any(k in line for k in keep)))
    out = tmp_path / "judgments.jsonl"
    assert main(["judge", "--configfile", str(cfg), "--model", "m", "--judge", "m", "--option", "axes=action_type,safety",
                 "--option", "only=dataset_items", "--in", f"dataset={sample}", "--in", f"rollouts={o}/rollouts0.jsonl",
                 "--out", f"judgments={out}"]) == 0
    judged = list(read_jsonl(out))
    assert {j["item_id"] for j in judged} == {r0[0]["item_id"]}
    assert sorted(j["axis"] for j in judged) == ["action_type", "safety"]


def test_the_leak_probe_guesses_every_released_row_from_its_rationale(chain):
    _, o, _ = chain
    dataset, probes = rows(o, "dataset"), rows(o, "leak_probe")
    assert [p["item_id"] for p in probes] == [d["item_id"] for d in dataset]
    assert all(p["status"] == "ok" and p["guess"] in ("NSP", "SP") for p in probes)
    summary = {r["scope"]: r for r in csv.DictReader((o / "leak_probe.csv").open())}
    assert int(summary["all rows"]["rows"]) == len(dataset) and set(summary) == {"all rows", "paired rows"}
    prov = json.loads((o / "leak_probe.jsonl.prov.json").read_text())
    assert "leak_probe.v1" in prov["prompts"]
