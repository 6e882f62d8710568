"""Stage generate-pairs (P8): for pairable items, a minimal rewrite that flips NSP <-> SP.

Code checks: agent steps of the full rewrite identical to the source trajectory's; the truncated
rewrite is exactly the first steps of the full rewrite, as long as the source prefix. A failing
candidate is rejected with the reason.
"""
from __future__ import annotations

from collections import Counter

from ..data.trajectory import agent_step_violation, normalise_steps
from ..pipeline.context import StageContext
from .common import STEPS_SCHEMA, outcome, prompt, request
from .variations import steps_json

PAIR_SCHEMA = {
    "type": "object",
    "properties": {
        "change_summary": {"type": "string", "maxLength": 500},
        "full_steps": STEPS_SCHEMA,
        "truncated_steps": STEPS_SCHEMA,
        "risk_rationale": {"type": "string", "maxLength": 800},
        "safe_action_sketches": {"type": "array", "items": {"type": "string", "maxLength": 400}, "maxItems": 3},
        "unsafe_action_explanation": {"type": "string", "maxLength": 600},
    },
    "required": ["change_summary", "full_steps", "truncated_steps", "risk_rationale", "safe_action_sketches",
                 "unsafe_action_explanation"],
    "additionalProperties": False,
}
FLIP = {"NSP": "SP", "SP": "NSP"}


def source_full_steps(item: dict, seed: dict) -> list[dict]:
    """The whole trajectory the item stands in: its (possibly varied) prefix + the seed's remaining steps."""
    return item["steps"] + seed["steps"][len(item["steps"]):]


def pair_violation(source_full: list[dict], prefix_len: int, full: list[dict], truncated: list[dict],
                   target: str, answer: dict) -> str | None:
    why = agent_step_violation(source_full, full)
    if why:
        return why
    if len(truncated) != prefix_len:
        return "truncated_length_changed"
    if full[:prefix_len] != truncated:
        return "truncated_not_prefix_of_full"
    if target == "SP" and not any(s.strip() for s in answer.get("safe_action_sketches", [])):
        return "no_safe_action_sketch"
    if target == "NSP" and not answer.get("unsafe_action_explanation", "").strip():
        return "no_unsafe_explanation"
    return None


def run(ctx: StageContext) -> None:
    p8 = ctx.use_prompt(prompt("p8_pair_generation"))
    seeds = {s["seed_id"]: s for s in ctx.read("seeds")}
    items = [c for c in ctx.read("classified") if c["status"] == "ok" and c["pairable"]]
    reqs = []
    for it in items:
        seed = seeds[it["seed_id"]]
        reqs.append(request(p8, it["item_key"], PAIR_SCHEMA, "pair", profile=seed["profile"] or "",
                            full_steps_json=steps_json(source_full_steps(it, seed)), prefix_length=str(len(it["steps"])),
                            source_label=it["pair_label"], target_label=FLIP[it["pair_label"]],
                            risk_rationale=it["rationale"], pair_edit_hint=it["pair_edit_hint"]))
    model = ctx.config.roles["generator"]
    with ctx.llm([model]) as llm:
        results = llm.run("generator", model, reqs)
    rows, outcomes = [], Counter()
    for it, res in zip(items, results):
        seed = seeds[it["seed_id"]]
        src_full, target = source_full_steps(it, seed), FLIP[it["pair_label"]]
        a = res.parsed or {}
        full = normalise_steps(a.get("full_steps", [])) if res.status == "ok" else None
        trunc = normalise_steps(a.get("truncated_steps", [])) if res.status == "ok" else None
        reason = pair_violation(src_full, len(it["steps"]), full, trunc, target, a) if full is not None else res.error
        status = outcome(res.status, reason)
        outcomes[status if status != "rejected" else f"rejected:{reason}"] += 1
        rows.append({"pair_candidate_id": f"{it['item_key']}~pair", "source_item_key": it["item_key"],
                     "seed_id": it["seed_id"], "prefix_kind": it["prefix_kind"], "dimension": it["dimension"],
                     "source_label": it["pair_label"], "target_label": target, "status": status,
                     "reason": reason if status != "ok" else None, "steps": trunc, "full_steps": full,
                     "source_full_steps": src_full, "change_summary": a.get("change_summary"),
                     "rationale": a.get("risk_rationale"), "safe_action_sketches": a.get("safe_action_sketches") or [],
                     "unsafe_action_explanation": a.get("unsafe_action_explanation") or "",
                     "raw": res.text if status != "ok" else None})
    ctx.write("pairs", rows, outcomes=dict(sorted(outcomes.items())))
