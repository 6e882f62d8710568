"""Placeholder behaviour for construction stages not built yet (issue: dataset construction).

These keep the DAG real and the chain runnable. Each output's provenance says ``thin: true``
and what the stage does for now, so nothing downstream can mistake it for the paper's method.
"""
from __future__ import annotations

from ..data.trajectory import render_steps, user_instruction
from ..io import sha256_text
from ..pipeline.context import StageContext

THIN = {"thin": True}


def empty(ctx: StageContext) -> None:
    """Stages with no implementation yet produce empty outputs (no candidates)."""
    for name in ctx.outputs:
        ctx.write(name, [], **THIN, note="stage not built yet: produces no candidates")


def tag_truncate(ctx: StageContext) -> None:
    """Heuristic tagging: decision = last agent step with an action; trigger = the user/environment
    step right before it; one at-trigger prefix per seed. P1 replaces this."""
    rows = []
    for seed in ctx.read("seeds"):
        steps = seed["steps"]
        decision = max((i for i, s in enumerate(steps) if s["role"] == "agent" and s.get("action")), default=None)
        trigger = None
        if decision is not None:
            trigger = max((i for i in range(decision) if steps[i]["role"] != "agent"), default=None)
        if decision is None or trigger is None:
            continue
        rows.append({
            "prefix_id": f"{seed['seed_id']}#at_trigger",
            "seed_id": seed["seed_id"],
            "prefix_kind": "at_trigger",
            "trigger_step": trigger,
            "execution_step": decision,
            "steps": steps[:decision],
        })
    ctx.write("prefixes", rows, **THIN, note="heuristic tags, not P1")


def classify(ctx: StageContext) -> None:
    """Label originals from the R-Judge source label (1 -> NSP, 0 -> SP). P7 replaces this."""
    seeds = {s["seed_id"]: s for s in ctx.read("seeds")}
    rows = []
    for p in ctx.read("prefixes"):
        seed = seeds[p["seed_id"]]
        rows.append({**p, "dimension": "original", "pair_label": "NSP" if seed["source_label"] == 1 else "SP",
                     "rationale": seed["risk_description"], "pairable": False})
    ctx.write("classified", rows, **THIN, note="pair label proxied by R-Judge label, not P7")


def item_id(seed_id: str, prefix_kind: str, dimension: str, pair_side: str) -> str:
    """Stable id from content identity, never from row order."""
    return "it_" + sha256_text(f"{seed_id}|{prefix_kind}|{dimension}|{pair_side}")[:16]


def finalize(ctx: StageContext) -> None:
    seeds = {s["seed_id"]: s for s in ctx.read("seeds")}
    rows = []
    for c in ctx.read("classified"):
        seed = seeds[c["seed_id"]]
        rows.append({
            "item_id": item_id(c["seed_id"], c["prefix_kind"], c["dimension"], "source"),
            "seed_id": c["seed_id"],
            "domain": seed["domain"],
            "source_label": seed["source_label"],
            "prefix_kind": c["prefix_kind"],
            "dimension": c["dimension"],
            "pair_label": c["pair_label"],
            "pair_id": None,
            "pair_role": None,
            "rationale": c["rationale"],
            "sketches": [],
            "profile": seed["profile"],
            "user_instruction": user_instruction(c["steps"]),
            "steps": c["steps"],
            "model_input": render_steps(c["steps"]),
        })
    rows.sort(key=lambda r: r["item_id"])
    ctx.write("dataset", rows, **THIN, note="originals only until variations and pairs exist")
