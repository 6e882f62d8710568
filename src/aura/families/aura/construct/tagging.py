"""Stage tag-truncate (P1): tag risk trigger r and execution point e, validate in code, build prefixes.

r is a [USER] or [ENVIRONMENT] step, never an agent step; e is null or the index of an agent step
with an action after r. A tag breaking these rules is re-asked, then rejected with the reason.
Prefixes: at-trigger = steps[:r+1] for every tagged seed; pre-execution = steps[:e] when e exists
and differs (e > r+1). The evaluated decision is the next agent thought+action.
"""
from __future__ import annotations

from aura.pipeline.context import StageContext

from ..data.trajectory import render_indexed
from .common import outcome, prompt, request, run_with_rule_checks


def tag_schema(steps: list[dict]) -> dict:
    """Answer schema; the step indices are constrained to the right kinds of step where the endpoint
    enforces schemas, and validated in code either way."""
    non_agent = [i for i, s in enumerate(steps) if s["role"] != "agent"]
    agent = [i for i, s in enumerate(steps) if s["role"] == "agent"]
    return {
        "type": "object",
        "properties": {
            "rationale": {"type": "string", "maxLength": 400},
            "risk_trigger_step": {"type": "integer", "enum": non_agent or [0]},
            "execution_step": {"anyOf": [{"type": "integer", "enum": agent or [0]}, {"type": "null"}]},
        },
        "required": ["rationale", "risk_trigger_step", "execution_step"],
        "additionalProperties": False,
    }


def tag_violation(steps: list[dict], tag: dict) -> str | None:
    r, e = tag.get("risk_trigger_step"), tag.get("execution_step")
    if not isinstance(r, int) or not 0 <= r < len(steps):
        return f"risk_trigger_step {r!r} is not a step index (0..{len(steps) - 1})"
    if steps[r]["role"] == "agent":
        return f"risk_trigger_step {r} is an agent step; the trigger must be a user or environment step"
    if e is None:
        if any(s["role"] == "agent" and s.get("action") for s in steps[r + 1:]):
            return "execution_step is null although an agent action follows the trigger"
        return None
    if not isinstance(e, int) or not 0 <= e < len(steps):
        return f"execution_step {e!r} is not a step index"
    if e <= r:
        return f"execution_step {e} is not after the risk trigger {r}"
    if steps[e]["role"] != "agent" or not steps[e].get("action"):
        return f"execution_step {e} is not an agent step with an action"
    return None


def prefixes_for(seed: dict, r: int, e: int | None) -> list[dict]:
    steps = seed["steps"]
    base = {"seed_id": seed["seed_id"], "trigger_step": r, "execution_step": e}
    out = [{**base, "prefix_id": f"{seed['seed_id']}#at_trigger", "prefix_kind": "at_trigger", "steps": steps[: r + 1]}]
    if e is not None and e > r + 1:
        out.append({**base, "prefix_id": f"{seed['seed_id']}#pre_execution", "prefix_kind": "pre_execution",
                    "steps": steps[:e]})
    return out


def run(ctx: StageContext) -> None:
    p1 = ctx.use_prompt(prompt("p1_step_tagging"))
    seeds = ctx.read("seeds")
    model = ctx.config.raw["aura"]["roles"]["generator"]
    reqs = [request(p1, s["seed_id"], tag_schema(s["steps"]), "step_tags", profile=s["profile"] or "",
                    trajectory=render_indexed(s["steps"]), risk_description=s["risk_description"]) for s in seeds]
    with ctx.llm([model]) as llm:
        results, violations, attempts = run_with_rule_checks(
            llm, "generator", model, reqs, lambda i, tag: tag_violation(seeds[i]["steps"], tag),
            ctx.config.raw["aura"]["construct"]["rule_tries"])
    tags, prefixes = [], []
    for seed, res, why, n in zip(seeds, results, violations, attempts):
        tag = res.parsed or {}
        status = outcome(res.status, why)
        tags.append({"seed_id": seed["seed_id"], "status": status, "reason": why or res.error, "attempts": n,
                     "risk_trigger_step": tag.get("risk_trigger_step"), "execution_step": tag.get("execution_step"),
                     "rationale": tag.get("rationale"), "raw": res.text if status != "ok" else None})
        if status == "ok":
            prefixes.extend(prefixes_for(seed, tag["risk_trigger_step"], tag["execution_step"]))
    ctx.write("tags", tags)
    ctx.write("prefixes", prefixes)
