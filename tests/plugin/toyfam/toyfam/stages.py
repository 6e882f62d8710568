"""toyfam's stage, estimate hook and viewer part: each reuses the core (LLM layer, prompts, stage context,
estimate kernel, viewer frame) and copies none of it."""
from __future__ import annotations

from aura.io import read_jsonl
from aura.llm.rule_checks import request
from aura.pipeline.context import StageContext
from aura.prompts import get_prompt
from aura.web.viewer.part import ViewerPart

SCHEMA = {"type": "object", "properties": {"answer": {"type": "string", "enum": ["yes", "no"]}},
          "required": ["answer"], "additionalProperties": False}


def run_answer(ctx: StageContext) -> None:
    model = ctx.config.section("toyfam")["model"]
    prompt = ctx.use_prompt(get_prompt("toyfam_answer"))
    items = ctx.read("questions")
    with ctx.llm([model]) as llm:
        results = llm.run("judge", model, [request(prompt, it["id"], SCHEMA, "toy_answer", question=it["question"])
                                           for it in items])
    ctx.write("answers", [{"item_id": it["id"], "model": model, "status": res.status,
                           "answer": (res.parsed or {}).get("answer") if res.status == "ok" else None}
                          for it, res in zip(items, results)])


def estimate(config):
    from aura.estimate import projected_line

    section = config.section("toyfam")
    n = sum(1 for _ in read_jsonl(section["items"]))
    return [projected_line(config, "toyfam-answer", section["model"], n, 40, role="judge",
                           prompts=["toyfam_answer"], out_each=8)], f"toyfam: {n} items"


class Part(ViewerPart):
    """The toy family's rows in the viewer: one per answer (the frame's default row template shows them)."""

    title = "Toy family"

    def load(self, data, layout):
        import pandas as pd

        rows = [r for _, path in data.files(layout["toyfam_answers"]) for r in read_jsonl(path)]
        return pd.DataFrame([{"key": r["item_id"], "item_id": r["item_id"], "model": r["model"],
                              "label": r["answer"] or f"({r['status']})", "text": r["item_id"].lower()}
                             for r in rows])


