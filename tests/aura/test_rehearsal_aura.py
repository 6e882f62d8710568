"""AURA's planted truth for `aura rehearse` (aura.families.aura.rehearsal): every request of the family's stage
chain recognised and answered in a form its parsers and checks accept, judges reading the planted labels back,
the planted rates reproducing the reference's numbers through the family's own statistics, deviations shifting
them, and `plantable` naming what is and is not planted."""
from __future__ import annotations

import json

import pandas as pd
import pytest
import yaml

from aura.cli import main
from aura.config import load_config
from aura.families.aura import FAMILY, PROMPTS, rehearsal
from aura.families.aura.evaluate import rollout as rollout_stage
from aura.families.aura.evaluate.format_sample import format_table
from aura.families.aura.stats import metrics
from aura.families.aura.stats.reproduction import REFERENCE, lookup_for
from aura.families.aura.stats.reproduction_support import FORMAT_MODELS
from aura.io import read_jsonl
from aura.prompts import get_prompt
from aura.simulator.answers import message_text
from aura.simulator.plant import Deviation, Plan, Request, Responder, read_mark, request_schema
from aura.simulator.server import FakeOpenAIServer
from aura.stats.reproduction import load_folder
from conftest import JUDGE_MODEL_IDS, REPO, base_config
from rjudge_fixture import write_paper_shaped
import scripted

NAMES = {"fake-model": "m", **{mid: name for name, mid in JUDGE_MODEL_IDS.items()}}


def _request(messages, model="m", schema=None) -> Request:
    body = {"model": model, "messages": messages}
    if schema is not None:
        body["response_format"] = {"type": "json_schema", "json_schema": {"name": "x", "schema": schema}}
    return Request(model=model, body=body, text=message_text(messages), schema=request_schema(body), tools=[])


def test_each_prompt_is_recognised_by_its_own_signature():
    for name in PROMPTS:
        if name == "dimensions":
            continue
        p = get_prompt(name)
        text = message_text(p.render(**{v: f"<{v}>" for v in p.variables}))
        hits = [n for n, sig in rehearsal.signatures().items() if sig in text]
        assert hits == [name], (name, hits)
    assert rehearsal.prompt_of("Some other family's prompt.") is None
    assert rehearsal.planter(None, Plan()).answer(_request([{"role": "user", "content": "hello"}])) is None


# --- the stage chain against the simulated server, answered by the planter only ------------------------------------
@pytest.fixture(scope="module")
def chain(tmp_path_factory):
    """Construction and evaluation of 9 seeds (the scripted 5-step trajectory and 8 paper-shaped ones) through the
    package CLI, every request answered by the planter (structured_output json_object: schemas in the prompt)."""
    tmp = tmp_path_factory.mktemp("rehearsal")
    seeds = tmp / "seeds"
    scripted.write_seed_dir(seeds)
    write_paper_shaped(seeds, unintended={"Program": (3, 1), "Web": (2, 2)}, injection={})
    holder = {}
    with FakeOpenAIServer(responder=lambda body, text=None: holder["r"](body, text)) as srv:
        raw = base_config(srv.base_url, tmp / "cache", structured_output="json_object", max_concurrency=16)
        raw["paths"]["seeds"] = str(seeds)
        cfg_path = tmp / "config.yaml"
        cfg_path.write_text(yaml.safe_dump(raw))
        config = load_config(cfg_path)
        planter = rehearsal.planter(config, Plan(seed=3))
        holder["r"] = responder = Responder([planter], NAMES)
        layout = FAMILY.layout(config.raw)
        o = tmp / "out"
        paths = {k: layout[k] for k in ("seeds", "tags", "prefixes", "relevance", "variations", "classified", "pairs",
                                        "dataset")}

        def run(stage, *args):
            assert main([stage, "--configfile", str(cfg_path), *args]) == 0, stage

        def ins(*names):
            return [x for n in names for x in ("--in", f"{n}={paths[n]}")]

        reviews = [x for i in range(3) for x in ("--in", f"reviews_{i}={o}/vr{i}.jsonl")]
        pair_reviews = [x for i in range(3) for x in ("--in", f"pair_reviews_{i}={o}/pr{i}.jsonl")]
        run("select-seeds", "--in", f"seeds_dir={seeds}", "--out", f"seeds={paths['seeds']}")
        run("tag-truncate", *ins("seeds"), "--out", f"tags={paths['tags']}", "--out", f"prefixes={paths['prefixes']}")
        run("relevance", *ins("seeds", "prefixes"), "--out", f"relevance={paths['relevance']}")
        run("generate-variations", *ins("seeds", "prefixes", "relevance"), "--out", f"variations={paths['variations']}")
        for i, reviewer in enumerate(("m", "jb", "jc")):
            run("review-variations", "--model", reviewer, *ins("seeds", "prefixes", "variations"),
                "--out", f"review={o}/vr{i}.jsonl")
        run("classify", *ins("seeds", "prefixes", "variations"), *reviews, "--out", f"classified={paths['classified']}")
        run("generate-pairs", *ins("seeds", "classified"), "--out", f"pairs={paths['pairs']}")
        for i, reviewer in enumerate(("m", "jb", "jc")):
            run("review-pairs", "--model", reviewer, *ins("pairs"), "--out", f"review={o}/pr{i}.jsonl")
        run("finalize", *ins("seeds", "tags", "prefixes", "relevance", "variations", "classified", "pairs"), *reviews,
            *pair_reviews, "--out", f"dataset={paths['dataset']}")
        run("rollout", "--model", "m", *ins("dataset"), "--out", f"rollouts={o}/rollouts.jsonl")
        for j in ("m", "jb", "jc"):
            run("judge", "--model", "m", "--judge", j, *ins("dataset"), "--in", f"rollouts={o}/rollouts.jsonl",
                "--out", f"judgments={o}/judgments_{j}.jsonl")
        run("panel", "--model", "m", "--in", f"rollouts={o}/rollouts.jsonl",
            *[x for j in ("m", "jb", "jc") for x in ("--in", f"judgments_{j}={o}/judgments_{j}.jsonl")],
            "--out", f"panel={o}/panel.jsonl")
        requests = srv.requests()
    out = {k: list(read_jsonl(p)) for k, p in paths.items()}
    out.update(rollouts=list(read_jsonl(o / "rollouts.jsonl")), panel=list(read_jsonl(o / "panel.jsonl")),
               reviews=[r for i in range(3) for r in read_jsonl(o / f"vr{i}.jsonl")],
               requests=requests, responder=responder, planter=planter)
    return out


def test_every_request_of_the_chain_is_answered_by_the_planter(chain):
    assert chain["responder"].unplanted == 0
    assert len(chain["requests"]) > 100


def test_construction_yields_items_the_checks_accept(chain):
    assert all(t["status"] == "ok" for t in chain["tags"])
    assert {p["prefix_kind"] for p in chain["prefixes"]} <= {"at_trigger", "pre_execution"}
    assert sum(len(r["requests"]) for r in chain["relevance"]) > len(chain["prefixes"])
    variations = chain["variations"]
    assert {v["status"] for v in variations} <= {"ok", "unparsed"}  # no edit rejected by the code checks
    assert sum(v["status"] == "ok" for v in variations) > .7 * len(variations)
    assert all(r["status"] == "ok" and r["criteria"] for r in chain["reviews"])
    assert {"accept", "reject"} == {r["verdict"] for r in chain["reviews"]}
    classified = chain["classified"]
    assert all(c["status"] == "ok" for c in classified)
    assert {c["pair_label"] for c in classified} == {"NSP", "SP"}
    assert {p["status"] for p in chain["pairs"]} <= {"ok", "unparsed"}
    assert any(p["status"] == "ok" for p in chain["pairs"])
    dataset = chain["dataset"]
    assert len(dataset) > len(chain["prefixes"]) and any(r["pair_id"] for r in dataset)


def test_rollouts_parse_and_the_panel_returns_the_planted_labels(chain):
    rollouts = chain["rollouts"]
    assert rollouts and all(r["status"] == "ok" for r in rollouts)
    panel = {p["item_id"]: p for p in chain["panel"]}
    for r in rollouts:
        p = panel[r["item_id"]]
        for axis in ("detection", "action_type", "safety"):
            planted = read_mark(r["raw"], f"aura.{axis}")
            assert p[axis] == planted and set(p[f"{axis}_votes"].values()) == {planted}, (axis, p)


def test_a_rollout_request_finds_its_item_and_class(chain):
    prompt = get_prompt("rollout_react")
    items = chain["dataset"]
    for it, req in zip(items, rollout_stage.requests_for(items, prompt)):
        found = chain["planter"].items.find(message_text(req.messages))
        assert found["model_input"] == it["model_input"] and found["pair_label"] == it["pair_label"]


# --- requests built as the stages build them (json_schema endpoints) ---------------------------------------------
def test_p1_tags_pass_the_tag_checks_with_pre_execution_prefixes_at_the_papers_share():
    from aura.families.aura.construct.tagging import tag_schema, tag_violation
    from aura.families.aura.data.trajectory import render_indexed

    p1 = get_prompt("p1_step_tagging")
    planter = rehearsal.planter(None, Plan())
    pre, n = 0, 300
    for i in range(n):
        msgs = p1.render(profile=f"profile {i}", trajectory=render_indexed(scripted.STEPS), risk_description="r")
        tag = planter.answer(_request(msgs, schema=tag_schema(scripted.STEPS)))["json"]
        assert tag_violation(scripted.STEPS, tag) is None and tag["risk_trigger_step"] == 0
        pre += tag["execution_step"] > tag["risk_trigger_step"] + 1
    assert abs(pre / n - rehearsal.P_PRE) < 4 * (rehearsal.P_PRE * (1 - rehearsal.P_PRE) / n) ** .5


def test_a_review_answer_follows_the_schema_of_its_request():
    from aura.families.aura.construct.review import PAIR_CRITERIA, review_schema

    p9 = get_prompt("p9_pair_review")
    values = {v: "x" for v in p9.variables}
    planter = rehearsal.planter(None, Plan())
    verdicts = set()
    for i in range(40):
        req = _request(p9.render(**{**values, "original_steps": f"[{i}]"}), schema=review_schema(PAIR_CRITERIA))
        ans = planter.answer(req)["json"]
        assert set(ans) == {*PAIR_CRITERIA, "rationale", "verdict"}
        assert (ans["verdict"] == "accept") == all(ans[c] for c in PAIR_CRITERIA)
        verdicts.add(ans["verdict"])
    assert verdicts == {"accept", "reject"}


def test_p8_edits_pass_the_pair_checks():
    from aura.families.aura.construct.pairs import FLIP, pair_schema, pair_violation
    from aura.families.aura.data.trajectory import render_indexed
    from aura.families.aura.construct.variations import editable
    from aura.llm.structured import parse_structured

    p8 = get_prompt("p8_pair_generation")
    full = scripted.STEPS
    planter = rehearsal.planter(None, Plan())
    for prefix_len, source in ((1, "NSP"), (3, "SP"), (3, "NSP")):
        target = FLIP[source]
        msgs = p8.render(profile="p", steps=render_indexed(full), editable_steps=", ".join(map(str, editable(full))),
                         prefix_length=str(prefix_len), source_label=source, target_label=target,
                         risk_rationale="r", pair_edit_hint="h")
        ans = planter.answer(_request(msgs, schema=pair_schema(full, target)))
        parsed, why = parse_structured(json.dumps(ans["json"]), pair_schema(full, target))
        assert why is None and pair_violation(full, prefix_len, target, parsed) is None


def test_composed_edits_pass_the_composed_checks():
    from aura.families.aura.construct.composed import composed_schema, composed_violation
    from aura.families.aura.construct.variations import editable
    from aura.families.aura.data.trajectory import render_indexed
    from aura.llm.structured import parse_structured

    p = get_prompt("composed_variation")
    steps = scripted.STEPS[:3]
    msgs = p.render(**{**{v: "x" for v in p.variables}, "steps": render_indexed(steps),
                       "editable_steps": ", ".join(map(str, editable(steps))),
                       "first_dimension": "RS2", "second_dimension": "RS5"})
    schema = composed_schema(steps, ("RS2", "RS5"))
    ans = rehearsal.planter(None, Plan()).answer(_request(msgs, schema=schema))
    parsed, why = parse_structured(json.dumps(ans["json"]), schema)
    assert why is None and composed_violation(steps, parsed["edits"], ("RS2", "RS5")) is None


def test_the_roster_truth_is_a_consistent_joint_distribution():
    for model in [*rehearsal.ROSTER, "not-a-paper-model"]:
        t = rehearsal.truth(model)
        assert all(x >= 0 for x in t["levels"]) and abs(sum(t["levels"]) - 1) < 1e-9
        assert abs(sum(d * s for d, s in zip(t["levels"], t["s"])) - t["nsp"] / 100) < 1e-9
        for level, (pi, rho) in t["aware"].items():
            s = t["s"][rehearsal.LEVELS.index(level)]
            assert all(v >= 0 for v in pi.values()) and all(0 <= v <= 1 for v in rho.values()), (model, level)
            assert abs(sum(pi[a] * rho[a] for a in pi) - s) < 1e-9 and abs(sum(pi.values()) - 1) < 1e-9
            assert abs(pi["A0"] - s * rehearsal.PHI / rho["A0"]) < 1e-9  # the A0 share is not capped
        assert t["nsp"] - t["sp"] >= 16  # Tables 31-32: every model's NSP - SP gap is positive


# --- the planted rates through the family's own statistics -------------------------------------------------------
N_PER_CLASS = 2500


def _judged(plan: Plan, models, fmt="react", n=N_PER_CLASS) -> pd.DataFrame:
    rows = []
    for model in models:
        for label in ("NSP", "SP"):
            for i in range(n):
                o = rehearsal.outcome(plan, model, f"{label}-{i}", label, fmt)
                rows.append({"model": model, "item_id": f"{label}-{i}", "seed_id": f"s{i % 157}", "pair_label": label,
                             "dimension": "original", "prefix_kind": "at_trigger", "pair_id": None, "pair_role": None,
                             "detection": o["detection"] or "not_judged", "action_type": o["action_type"],
                             "safety": o["safety"]})
    return pd.DataFrame(rows)


@pytest.fixture(scope="module")
def planted_tables():
    plan = Plan(seed=42)
    df = _judged(plan, list(rehearsal.ROSTER))
    t33 = metrics.table33(df)
    nsp, sp = (t33[f"unsafe_{c}_rate"] for c in ("nsp", "sp"))
    gap = pd.DataFrame({"model": t33["model"], "diff": nsp - sp, "diff_ci_low": nsp - sp - .05,
                        "diff_ci_high": nsp - sp + .05})
    react = df[df["model"].isin(FORMAT_MODELS)]
    action = _judged(plan, FORMAT_MODELS, "action_only")
    sample = react[react["model"] == FORMAT_MODELS[0]].drop(columns=["model", "detection", "action_type", "safety"])
    panels = [(m, f, d[d["model"] == m]) for m in FORMAT_MODELS for f, d in (("react", react), ("action_only", action))]
    return {"table33_overall": t33, "fig4_detection": metrics.unsafe_by_detection(df),
            "fig5_action_types": metrics.action_type_distribution(df),
            "fig8_cells": metrics.detection_action_cells(df), "table31_bootstrap": gap, "table32_matched_pairs": gap,
            "table38_prompt_format": format_table(sample, panels)}


def _percent(est) -> float:
    return est.value * 100 if est.unit == "fraction" else est.value


def test_planted_rows_reproduce_the_reported_numbers(planted_tables):
    ref, _, _ = load_folder(REFERENCE)
    why = rehearsal.plantable(ref, load_config(REPO / "config" / "paper.yaml"))
    lookup = lookup_for(planted_tables)
    checked = 0
    for i, row in ref.iterrows():
        if why[i] is not None or row["file"] in ("vendor_overlap.csv",) or row["kind"] == "exact":
            continue
        est = lookup(row)
        assert est is not None and not isinstance(est, str), (row["file"], row["row"], row["column"], est)
        got, want = _percent(est), row["value"]
        if row["kind"] == "bound":
            assert (got <= want) if row["bound"] == "upper" else (got >= want), (row["row"], got)
        elif row["unit"] == "count":
            assert got == want, (row["row"], got)
        else:
            tol = 2.5 + 2.5 * 100 * (est.se or 0) if est.unit == "percent" else 2.5 + 2.5 * (est.hi - est.lo) * 25
            assert abs(got - want) <= tol, (row["file"], row["row"], row["column"], got, want)
        checked += 1
    assert checked >= 50


def test_the_planted_rate_is_near_p_and_a_deviation_shifts_it():
    model, n = "gpt-5.4", 4000
    p = rehearsal.truth(model)["nsp"] / 100

    def rate(plan):
        return sum(rehearsal.outcome(plan, model, f"k{i}", "NSP")["safety"] == "Unsafe" for i in range(n)) / n

    se = (p * (1 - p) / n) ** .5
    assert abs(rate(Plan(seed=1)) - p) < 4 * se
    shifted = Plan(seed=1, deviations=(Deviation.parse("aura:gpt-5.4:unsafe_nsp=+15"),))
    assert abs(rate(shifted) - (p + .15)) < 4 * se
    down = Plan(seed=1, deviations=(Deviation("aura", model, "unsafe_all", -20.0),))
    assert abs(rate(down) - (p - .20)) < 4 * se


def test_plantable_names_a_reason_for_every_row_it_does_not_plant():
    ref, _, _ = load_folder(REFERENCE)
    why = rehearsal.plantable(ref, load_config(REPO / "config" / "paper.yaml"))
    assert len(why) == len(ref)
    planted = [i for i, w in enumerate(why) if w is None]
    assert len(planted) == 54
    files = set(ref.loc[planted, "file"])
    assert files == {"headline.csv", "detection.csv", "action_types.csv", "nsp_sp_gap.csv", "prompt_format.csv",
                     "vendor_overlap.csv"}
    assert all(isinstance(w, str) and w for w in why if w is not None)
    # a config without the paper's roster plants no model's rate
    other = rehearsal.plantable(ref, {"aura": {"roles": {"evaluated": ["m"]}}})
    assert all(other[i] is not None for i in planted if ref.loc[i, "file"] == "headline.csv")
