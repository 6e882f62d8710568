"""Stage generate-variations (P3 for RS1, P4 for RS2-RS6 and SD1-SD5): edit, don't echo.

The generator answers only with edits to [USER]/[ENVIRONMENT] steps (step index -> new content);
the code splices them into the prefix, so agent steps stay frozen by construction. The answer schema
allows only editable step indices. Checks stay as a second line: an edit addressed to an agent step
or an unknown index, an empty edit, a step edited twice, no edit at all, or edits that change
nothing break a task rule; such an answer is re-asked with the reason, then rejected with it.
Rejections are counted by reason in the provenance.
"""
from __future__ import annotations

import json
from collections import Counter

from aura.llm import LLMRequest
from aura.pipeline.context import StageContext
from aura.prompts import Prompt

from ..data.trajectory import agent_step_violation, render_indexed
from .common import dimension_specs, outcome, prompt, request, run_with_rule_checks

MAX_EDITS = 3  # answers stay short: a minimal edit touches one or two steps


def steps_json(steps: list[dict]) -> str:
    return json.dumps(steps, ensure_ascii=False, indent=1)


def editable(steps: list[dict]) -> list[int]:
    """Indices of the steps an edit may address: user and environment steps."""
    return [i for i, s in enumerate(steps) if s["role"] != "agent"]


def edits_schema(steps: list[dict]) -> dict:
    """The `edits` answer field: a few {step, content} objects. The step is one of the editable
    indices, so an endpoint that constrains decoding (llama.cpp grammars, strict json_schema) cannot
    address an agent step at all: with a free integer the embedded SmolLM2 addressed agent step 1 in
    6 of 6 answers, re-asks included. Elsewhere a wrong index is a schema violation (unparsed, with
    the reason); `edit_violation` checks it again in code. An edit may be half as long again as the
    longest step it could replace (at least 300 characters), never unbounded."""
    longest = max((len(steps[i].get("content") or "") for i in editable(steps)), default=0)
    return {"type": "array", "maxItems": max(1, min(MAX_EDITS, len(editable(steps)))),
            "items": {"type": "object", "properties": {"step": {"type": "integer", "enum": editable(steps) or [0]},
                                                        "content": {"type": "string", "maxLength": max(300, longest + longest // 2)}},
                      "required": ["step", "content"], "additionalProperties": False}}


def variation_schema(steps: list[dict]) -> dict:
    return {"type": "object",
            "properties": {"change_summary": {"type": "string", "maxLength": 300}, "edits": edits_schema(steps),
                           "risk_description": {"type": "string", "maxLength": 500}},
            "required": ["change_summary", "edits", "risk_description"], "additionalProperties": False}


def edit_violation(steps: list[dict], edits: list[dict]) -> str | None:
    """Why a list of edits cannot be applied to `steps`, or None."""
    if not edits:
        return "no_edit: the answer lists no edit; give at least one"
    seen = set()
    for e in edits:
        i = e.get("step")
        if not isinstance(i, int) or isinstance(i, bool) or not 0 <= i < len(steps):
            return f"edit_index_out_of_range: step {i!r} is not a step index (0..{len(steps) - 1})"
        if steps[i]["role"] == "agent":
            return f"edit_addresses_agent_step: step {i} is an agent step; edit only steps {editable(steps)}"
        if i in seen:
            return f"edit_step_repeated: step {i} is edited twice"
        if not (e.get("content") or "").strip():
            return f"edit_empty: the new content of step {i} is empty"
        seen.add(i)
    return None


def splice(steps: list[dict], edits: list[dict]) -> list[dict]:
    """`steps` with each edited user/environment step's content replaced (edits already checked)."""
    new = {e["step"]: e["content"] for e in edits}
    return [{**s, "content": new[i]} if i in new else dict(s) for i, s in enumerate(steps)]


def spliced_violation(steps: list[dict], edits: list[dict]) -> str | None:
    """Edit checks, then the frozen-agent-step check on the spliced result (it also catches edits
    that change nothing)."""
    why = edit_violation(steps, edits) or agent_step_violation(steps, splice(steps, edits))
    return "no_change: every edited step keeps its old content" if why == "no_change" else why


def build_request(candidate: dict, steps: list[dict], seed: dict, p3: Prompt, p4: Prompt) -> LLMRequest:
    """The P3 (RS1) or P4 request for one candidate (prefix steps `steps`, dimension, element)."""
    common = {"profile": seed["profile"] or "", "steps": render_indexed(steps),
              "editable_steps": ", ".join(map(str, editable(steps))),
              "risk_description": seed["risk_description"], "element": candidate["element"]}
    schema, dim = variation_schema(steps), candidate["dimension"]
    if dim == "RS1":
        return request(p3, candidate["request_id"], schema, "variation_edits", **common)
    spec = dimension_specs()[dim]
    return request(p4, candidate["request_id"], schema, "variation_edits", dimension=dim,
                   definition=f"{spec['definition']} Direction: {spec['direction']}", **common)


def run(ctx: StageContext) -> None:
    p3 = ctx.use_prompt(prompt("p3_harm_intensity_variation"))
    p4 = ctx.use_prompt(prompt("p4_contextual_variation"))
    prefixes = {p["prefix_id"]: p for p in ctx.read("prefixes")}
    seeds = {s["seed_id"]: s for s in ctx.read("seeds")}
    candidates = [rq for row in ctx.read("relevance") for rq in row["requests"]]
    sources = [prefixes[c["prefix_id"]]["steps"] for c in candidates]
    reqs = [build_request(c, steps, seeds[prefixes[c["prefix_id"]]["seed_id"]], p3, p4)
            for c, steps in zip(candidates, sources)]
    model = ctx.config.raw["aura"]["roles"]["generator"]
    with ctx.llm([model]) as llm:
        results, violations, attempts = run_with_rule_checks(
            llm, "generator", model, reqs, lambda i, a: spliced_violation(sources[i], a["edits"]),
            ctx.config.raw["aura"]["construct"]["rule_tries"])
    rows, reasons = [], Counter()
    for c, src, res, why, n in zip(candidates, sources, results, violations, attempts):
        pre = prefixes[c["prefix_id"]]
        answer = res.parsed or {}
        status = outcome(res.status, why)
        reasons[status if status != "rejected" else f"rejected:{why.split(':')[0]}"] += 1
        rows.append({"variation_id": c["request_id"], "prefix_id": c["prefix_id"], "seed_id": pre["seed_id"],
                     "prefix_kind": pre["prefix_kind"], "dimension": c["dimension"], "status": status,
                     "reason": (why or res.error) if status != "ok" else None, "attempts": n,
                     "edits": answer.get("edits"), "steps": splice(src, answer["edits"]) if status == "ok" else None,
                     "change_summary": answer.get("change_summary"), "risk_description": answer.get("risk_description"),
                     "raw": res.text if status != "ok" else None})
    ctx.write("variations", rows, outcomes=dict(sorted(reasons.items())))
