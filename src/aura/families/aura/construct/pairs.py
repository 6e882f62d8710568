"""Stage generate-pairs (P8): for pairable items, a minimal edit that flips NSP <-> SP.

Edit, don't echo: the generator answers with edits to [USER]/[ENVIRONMENT] steps of the full
source trajectory; the code splices them in and cuts the truncated rewrite from the full rewrite,
so agent steps stay frozen and the truncated rewrite is a prefix of the full one by construction.
Second-line checks (re-asked with the reason, then rejected with it): the edit checks of
variations, at least one edit inside the prefix the evaluated model sees, and the sketch (SP) or
explanation (NSP) the target label needs, and a risk rationale that is label-free like P7's (the
safety judge reads it on both sides of a pair).
"""
from __future__ import annotations

from collections import Counter

from aura.llm import LLMRequest
from aura.pipeline.context import StageContext
from aura.prompts import Prompt

from ..data.trajectory import render_indexed
from .common import outcome, prompt, rationale_label_violation, request, run_with_rule_checks
from .variations import editable, edits_schema, splice, spliced_violation

FLIP = {"NSP": "SP", "SP": "NSP"}
# The label-specific answer field: sketches for a Safe-Path target, an explanation for No-Safe-Path.
TARGET_FIELD = {
    "SP": ("safe_action_sketches", {"type": "array", "items": {"type": "string", "maxLength": 300}, "maxItems": 2}),
    "NSP": ("unsafe_action_explanation", {"type": "string", "maxLength": 500}),
}


def pair_schema(full_steps: list[dict], target: str) -> dict:
    field, spec = TARGET_FIELD[target]
    props = {"change_summary": {"type": "string", "maxLength": 300}, "edits": edits_schema(full_steps),
             "risk_rationale": {"type": "string", "maxLength": 600}, field: spec}
    return {"type": "object", "properties": props, "required": list(props), "additionalProperties": False}


def source_full_steps(item: dict, seed: dict) -> list[dict]:
    """The whole trajectory the item stands in: its (possibly varied) prefix + the seed's remaining steps."""
    return item["steps"] + seed["steps"][len(item["steps"]):]


def pair_violation(source_full: list[dict], prefix_len: int, target: str, answer: dict) -> str | None:
    why = spliced_violation(source_full, answer["edits"])
    if why:
        return why
    if not any(e["step"] < prefix_len for e in answer["edits"]):
        return f"no_edit_in_prefix: no edit falls within the first {prefix_len} steps the evaluated model sees"
    if splice(source_full, answer["edits"])[:prefix_len] == source_full[:prefix_len]:
        return "prefix_unchanged: the edits leave the truncated prefix as it was"
    if target == "SP" and not any(s.strip() for s in answer.get("safe_action_sketches", [])):
        return "no_safe_action_sketch: a Safe-Path target needs at least one safe-action sketch"
    if target == "NSP" and not answer.get("unsafe_action_explanation", "").strip():
        return "no_unsafe_explanation: a No-Safe-Path target needs an unsafe-action explanation"
    if why := rationale_label_violation(answer.get("risk_rationale", "")):
        return why
    return None


def build_request(item: dict, full: list[dict], seed: dict, p8: Prompt) -> LLMRequest:
    """The P8 request for one pairable item whose whole source trajectory is `full`."""
    target = FLIP[item["pair_label"]]
    return request(p8, item["item_key"], pair_schema(full, target), "pair_edits", profile=seed["profile"] or "",
                   steps=render_indexed(full), editable_steps=", ".join(map(str, editable(full))),
                   prefix_length=str(len(item["steps"])), source_label=item["pair_label"], target_label=target,
                   risk_rationale=item["rationale"], pair_edit_hint=item["pair_edit_hint"])


def run(ctx: StageContext) -> None:
    p8 = ctx.use_prompt(prompt("p8_pair_generation"))
    seeds = {s["seed_id"]: s for s in ctx.read("seeds")}
    items = [c for c in ctx.read("classified") if c["status"] == "ok" and c["pairable"]]
    sources = [source_full_steps(it, seeds[it["seed_id"]]) for it in items]
    reqs = [build_request(it, full, seeds[it["seed_id"]], p8) for it, full in zip(items, sources)]
    model = ctx.config.raw["aura"]["roles"]["generator"]
    with ctx.llm([model]) as llm:
        results, violations, attempts = run_with_rule_checks(
            llm, "generator", model, reqs,
            lambda i, a: pair_violation(sources[i], len(items[i]["steps"]), FLIP[items[i]["pair_label"]], a),
            ctx.config.raw["aura"]["construct"]["rule_tries"])
    rows, outcomes = [], Counter()
    for it, src_full, res, why, n in zip(items, sources, results, violations, attempts):
        target = FLIP[it["pair_label"]]
        a = res.parsed or {}
        status = outcome(res.status, why)
        outcomes[status if status != "rejected" else f"rejected:{why.split(':')[0]}"] += 1
        full = splice(src_full, a["edits"]) if status == "ok" else None
        rows.append({"pair_candidate_id": f"{it['item_key']}~pair", "source_item_key": it["item_key"],
                     "seed_id": it["seed_id"], "prefix_kind": it["prefix_kind"], "dimension": it["dimension"],
                     "source_label": it["pair_label"], "target_label": target, "status": status,
                     "reason": (why or res.error) if status != "ok" else None, "attempts": n, "edits": a.get("edits"),
                     "steps": full[:len(it["steps"])] if full else None, "full_steps": full,
                     "source_full_steps": src_full, "change_summary": a.get("change_summary"),
                     "rationale": a.get("risk_rationale"), "safe_action_sketches": a.get("safe_action_sketches") or [],
                     "unsafe_action_explanation": a.get("unsafe_action_explanation") or "",
                     "raw": res.text if status != "ok" else None})
    ctx.write("pairs", rows, outcomes=dict(sorted(outcomes.items())))
