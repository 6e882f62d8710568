"""Stages review-variations (P5 for RS1, P6 otherwise) and review-pairs (P9): one job per reviewer.

Every reviewer's verdict, criteria and rationale are stored; the majority is taken downstream
(classify for variations, finalize for pairs) with `common.majority_accept`.
"""
from __future__ import annotations

from aura.pipeline.context import StageContext

from .common import dimension_specs, prompt, request
from .variations import steps_json

VARIATION_CRITERIA = ["intended_change", "non_target_preserved", "agent_steps_preserved", "coherent"]
PAIR_CRITERIA = ["target_label_achieved", "agent_steps_preserved", "minimal_in_domain", "realistic_consistent",
                 "prefix_valid", "sketches_accurate"]


def review_schema(criteria: list[str]) -> dict:
    props = {c: {"type": "boolean"} for c in criteria}
    props["rationale"] = {"type": "string", "maxLength": 500}
    props["verdict"] = {"enum": ["accept", "reject"]}
    return {"type": "object", "properties": props, "required": list(props), "additionalProperties": False}


def _row(item_key: str, id_field: str, reviewer: str, res) -> dict:
    parsed = res.parsed or {}
    return {id_field: item_key, "reviewer": reviewer, "status": res.status, "verdict": parsed.get("verdict"),
            "criteria": {k: v for k, v in parsed.items() if isinstance(v, bool)} or None,
            "rationale": parsed.get("rationale"), "error": res.error}


def run_variations(ctx: StageContext) -> None:
    p5 = ctx.use_prompt(prompt("p5_harm_intensity_review"))
    p6 = ctx.use_prompt(prompt("p6_contextual_review"))
    prefixes = {p["prefix_id"]: p for p in ctx.read("prefixes")}
    seeds = {s["seed_id"]: s for s in ctx.read("seeds")}
    todo = [v for v in ctx.read("variations") if v["status"] == "ok"]
    specs, schema = dimension_specs(), review_schema(VARIATION_CRITERIA)
    reqs = []
    for v in todo:
        original = steps_json(prefixes[v["prefix_id"]]["steps"])
        if v["dimension"] == "RS1":
            reqs.append(request(p5, v["variation_id"], schema, "variation_review", original_steps=original,
                                variation_steps=steps_json(v["steps"]), change_summary=v["change_summary"] or "",
                                risk_description=seeds[v["seed_id"]]["risk_description"]))
        else:
            reqs.append(request(p6, v["variation_id"], schema, "variation_review", dimension=v["dimension"],
                                definition=specs[v["dimension"]]["definition"], original_steps=original,
                                variation_steps=steps_json(v["steps"]), change_summary=v["change_summary"] or ""))
    with ctx.llm([ctx.model]) as llm:
        results = llm.run("reviewer", ctx.model, reqs)
    ctx.write("review", [_row(v["variation_id"], "variation_id", ctx.model, r) for v, r in zip(todo, results)])


def run_pairs(ctx: StageContext) -> None:
    p9 = ctx.use_prompt(prompt("p9_pair_review"))
    todo = [p for p in ctx.read("pairs") if p["status"] == "ok"]
    schema = review_schema(PAIR_CRITERIA)
    reqs = [request(p9, p["pair_candidate_id"], schema, "pair_review", source_label=p["source_label"],
                    target_label=p["target_label"], original_steps=steps_json(p["source_full_steps"]),
                    rewritten_full=steps_json(p["full_steps"]), rewritten_truncated=steps_json(p["steps"]),
                    risk_rationale=p["rationale"] or "",
                    sketches="\n".join(p["safe_action_sketches"]) or p["unsafe_action_explanation"] or "")
            for p in todo]
    with ctx.llm([ctx.model]) as llm:
        results = llm.run("reviewer", ctx.model, reqs)
    ctx.write("review", [_row(p["pair_candidate_id"], "pair_candidate_id", ctx.model, r) for p, r in zip(todo, results)])
