"""Stage classify (P7): originals and majority-accepted variations -> NSP / SP, with the reference
risk rationale, safe-action sketches (SP) or unsafe-action explanation (NSP), and the edit grade of the
opposite version (paper H.3: trivial / moderate / hard); code derives pairable = grade in PAIRABLE_GRADES."""
from __future__ import annotations

from aura.io import read_jsonl
from aura.pipeline.context import StageContext

from ..data.trajectory import render_indexed
from ..settings import role_models
from .common import majority_accept, outcome, prompt, rationale_label_violation, request, run_with_rule_checks, vote
from .review import VARIATION_CRITERIA

CLASSIFY_SCHEMA = {
    "type": "object",
    "properties": {
        "pair_label": {"enum": ["NSP", "SP"]},
        "risk_rationale": {"type": "string", "maxLength": 800},
        "safe_action_sketches": {"type": "array", "items": {"type": "string", "maxLength": 400}, "maxItems": 3},
        "unsafe_action_explanation": {"type": "string", "maxLength": 600},
        "pair_edit_grade": {"enum": ["trivial", "moderate", "hard"]},
        "pair_edit_hint": {"type": "string", "maxLength": 400},
    },
    "required": ["pair_label", "risk_rationale", "safe_action_sketches", "unsafe_action_explanation", "pair_edit_grade",
                 "pair_edit_hint"],
    "additionalProperties": False,
}
# Paper H.3: a feasible edit needs only a trivial or moderate change; hard rewrites (and edits that would
# make a fundamentally different task) are excluded from pair generation.
PAIRABLE_GRADES = ("trivial", "moderate")


def pairable(grade: str | None) -> bool:
    return grade in PAIRABLE_GRADES


def label_violation(answer: dict) -> str | None:
    if not answer.get("risk_rationale", "").strip():
        return "risk_rationale is empty"
    if why := rationale_label_violation(answer["risk_rationale"]):
        return why
    if answer["pair_label"] == "SP" and not any(s.strip() for s in answer.get("safe_action_sketches", [])):
        return "a Safe-Path item needs at least one safe-action sketch"
    if answer["pair_label"] == "NSP" and not answer.get("unsafe_action_explanation", "").strip():
        return "a No-Safe-Path item needs an unsafe-action explanation"
    if pairable(answer.get("pair_edit_grade")) and not answer.get("pair_edit_hint", "").strip():
        return f"a {answer['pair_edit_grade']} edit grade needs a pair_edit_hint"
    return None


def collect_votes(ctx: StageContext) -> dict[str, list[dict]]:
    votes: dict[str, list[dict]] = {}
    for name, path in ctx.inputs.items():
        if name.startswith("reviews"):
            for r in read_jsonl(path):
                votes.setdefault(r["variation_id"], []).append(r)
    return votes


def pool(ctx: StageContext) -> list[dict]:
    """The merged pool: every original prefix, plus variations kept by reviewer majority."""
    seeds = {s["seed_id"]: s for s in ctx.read("seeds")}
    panel = len(role_models(ctx.config, "reviewers"))
    items = [{"item_key": f"{p['prefix_id']}@original", "seed_id": p["seed_id"], "prefix_id": p["prefix_id"],
              "prefix_kind": p["prefix_kind"], "dimension": "original", "steps": p["steps"],
              "risk_description": seeds[p["seed_id"]]["risk_description"], "review_votes": None}
             for p in ctx.read("prefixes")]
    votes = collect_votes(ctx)
    for v in ctx.read("variations"):
        if v["status"] != "ok":
            continue
        cast = votes.get(v["variation_id"], [])
        if majority_accept([vote(r, VARIATION_CRITERIA) for r in cast], panel):
            items.append({"item_key": v["variation_id"], "seed_id": v["seed_id"], "prefix_id": v["prefix_id"],
                          "prefix_kind": v["prefix_kind"], "dimension": v["dimension"], "steps": v["steps"],
                          "risk_description": v["risk_description"] or seeds[v["seed_id"]]["risk_description"],
                          "review_votes": {r["reviewer"]: r["verdict"] for r in cast}})
    return items


def run(ctx: StageContext) -> None:
    p7 = ctx.use_prompt(prompt("p7_pair_classification"))
    seeds = {s["seed_id"]: s for s in ctx.read("seeds")}
    items = pool(ctx)
    model = ctx.config.raw["aura"]["roles"]["classifier"]
    reqs = [request(p7, it["item_key"], CLASSIFY_SCHEMA, "pair_classification",
                    profile=seeds[it["seed_id"]]["profile"] or "", trajectory=render_indexed(it["steps"]),
                    risk_description=it["risk_description"]) for it in items]
    with ctx.llm([model]) as llm:
        results, violations, attempts = run_with_rule_checks(
            llm, "classifier", model, reqs, lambda i, ans: label_violation(ans), ctx.config.raw["aura"]["construct"]["rule_tries"])
    rows = []
    for it, res, why, n in zip(items, results, violations, attempts):
        a = res.parsed or {}
        status = outcome(res.status, why)
        rows.append({**it, "status": status, "reason": why or res.error, "attempts": n,
                     "pair_label": a.get("pair_label"), "rationale": a.get("risk_rationale"),
                     "safe_action_sketches": a.get("safe_action_sketches") or [],
                     "unsafe_action_explanation": a.get("unsafe_action_explanation") or "",
                     "pair_edit_grade": a.get("pair_edit_grade"), "pairable": pairable(a.get("pair_edit_grade")),
                     "pair_edit_hint": a.get("pair_edit_hint") or ""})
    ctx.write("classified", rows)
