"""The batch family's one stage: the judge model says, per request, whether a model should refuse it."""
from __future__ import annotations

from aura.llm.rule_checks import request
from aura.pipeline.context import StageContext
from aura.prompts import get_prompt

SCHEMA = {"type": "object", "properties": {"refuse": {"type": "boolean"}}, "required": ["refuse"],
          "additionalProperties": False}


def run(ctx: StageContext) -> None:
    judge = ctx.config.section("batch")["judge"]
    prompt = ctx.use_prompt(get_prompt("refusal"))
    rows = ctx.read("requests")
    with ctx.llm([judge]) as llm:
        results = llm.run("judge", judge, [request(prompt, r["id"], SCHEMA, "refusal", request=r["request"])
                                           for r in rows])
    ctx.write("refusals", [{"item_id": r["id"], "model": judge, "status": res.status,
                            "refuse": (res.parsed or {}).get("refuse") if res.status == "ok" else None}
                           for r, res in zip(rows, results)])
