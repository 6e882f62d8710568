"""Stage generate-variations (P3 for RS1, P4 for RS2-RS6 and SD1-SD5).

Only [USER]/[ENVIRONMENT] content may change: a variation whose agent steps differ in any way
(thoughts, actions, tool names, arguments, order, count) is rejected, as is one that changes
nothing. Rejections are counted by reason in the output's provenance.
"""
from __future__ import annotations

import json
from collections import Counter

from ..data.trajectory import agent_step_violation, normalise_steps
from ..pipeline.context import StageContext
from .common import STEPS_SCHEMA, dimension_specs, outcome, prompt, request

VARIATION_SCHEMA = {
    "type": "object",
    "properties": {
        "change_summary": {"type": "string", "maxLength": 500},
        "steps": STEPS_SCHEMA,
        "risk_description": {"type": "string", "maxLength": 800},
    },
    "required": ["change_summary", "steps", "risk_description"],
    "additionalProperties": False,
}


def steps_json(steps: list[dict]) -> str:
    return json.dumps(steps, ensure_ascii=False, indent=1)


def run(ctx: StageContext) -> None:
    p3 = ctx.use_prompt(prompt("p3_harm_intensity_variation"))
    p4 = ctx.use_prompt(prompt("p4_contextual_variation"))
    prefixes = {p["prefix_id"]: p for p in ctx.read("prefixes")}
    seeds = {s["seed_id"]: s for s in ctx.read("seeds")}
    candidates = [rq for row in ctx.read("relevance") for rq in row["requests"]]
    specs = dimension_specs()
    reqs = []
    for c in candidates:
        pre = prefixes[c["prefix_id"]]
        seed = seeds[pre["seed_id"]]
        common = {"profile": seed["profile"] or "", "steps_json": steps_json(pre["steps"]),
                  "risk_description": seed["risk_description"], "element": c["element"]}
        if c["dimension"] == "RS1":
            reqs.append(request(p3, c["request_id"], VARIATION_SCHEMA, "variation", **common))
        else:
            reqs.append(request(p4, c["request_id"], VARIATION_SCHEMA, "variation", dimension=c["dimension"],
                                definition=specs[c["dimension"]]["definition"], **common))
    model = ctx.config.roles["generator"]
    with ctx.llm([model]) as llm:
        results = llm.run("generator", model, reqs)
    rows, reasons = [], Counter()
    for c, res in zip(candidates, results):
        pre = prefixes[c["prefix_id"]]
        answer = res.parsed or {}
        steps = normalise_steps(answer.get("steps", [])) if res.status == "ok" else None
        reason = agent_step_violation(pre["steps"], steps) if steps is not None else res.error
        status = outcome(res.status, reason)
        reasons[status if status != "rejected" else f"rejected:{reason}"] += 1
        rows.append({"variation_id": c["request_id"], "prefix_id": c["prefix_id"], "seed_id": pre["seed_id"],
                     "prefix_kind": pre["prefix_kind"], "dimension": c["dimension"], "status": status,
                     "reason": reason if status != "ok" else None, "steps": steps,
                     "change_summary": answer.get("change_summary"), "risk_description": answer.get("risk_description"),
                     "raw": res.text if status != "ok" else None})
    ctx.write("variations", rows, outcomes=dict(sorted(reasons.items())))
