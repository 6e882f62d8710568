"""Stage relevance (P2): which of RS1-RS6 / SD1-SD5 can be varied for each prefix (groundedness
rule: the prefix already has a concrete element along the dimension), exploded into one candidate
request per (prefix, relevant dimension), capped by `construct.max_dimensions_per_prefix`."""
from __future__ import annotations

from ..data.trajectory import render_indexed
from ..io import sha256_file
from ..pipeline.context import StageContext
from ..prompts import prompt_path
from .common import DIMENSIONS, dimensions_text, prompt, request

RELEVANCE_SCHEMA = {
    "type": "object",
    "properties": {
        code: {"type": "object",
               "properties": {"relevant": {"type": "boolean"}, "element": {"type": "string", "maxLength": 200}},
               "required": ["relevant", "element"], "additionalProperties": False}
        for code in DIMENSIONS
    },
    "required": DIMENSIONS,
    "additionalProperties": False,
}


def explode(prefix_id: str, answer: dict, cap: int | None) -> list[dict]:
    """Candidate requests in canonical dimension order; the cap keeps the first `cap`."""
    relevant = [c for c in DIMENSIONS if (answer.get(c) or {}).get("relevant") is True]
    if cap is not None:
        relevant = relevant[:cap]
    return [{"request_id": f"{prefix_id}@{c}", "prefix_id": prefix_id, "dimension": c,
             "element": answer[c].get("element", "")} for c in relevant]


def run(ctx: StageContext) -> None:
    p2 = ctx.use_prompt(prompt("p2_dimension_relevance"))
    prefixes = ctx.read("prefixes")
    seeds = {s["seed_id"]: s for s in ctx.read("seeds")}
    model = ctx.config.roles["generator"]
    dims = dimensions_text()
    reqs = [request(p2, p["prefix_id"], RELEVANCE_SCHEMA, "dimension_relevance",
                    profile=seeds[p["seed_id"]]["profile"] or "", trajectory=render_indexed(p["steps"]),
                    risk_description=seeds[p["seed_id"]]["risk_description"], dimensions=dims) for p in prefixes]
    with ctx.llm([model]) as llm:
        results = llm.run("generator", model, reqs)
    cap = ctx.config.raw["construct"]["max_dimensions_per_prefix"]
    rows = []
    for p, res in zip(prefixes, results):
        answer = res.parsed or {}
        rows.append({"prefix_id": p["prefix_id"], "seed_id": p["seed_id"], "status": res.status, "error": res.error,
                     "relevant": [c for c in DIMENSIONS if (answer.get(c) or {}).get("relevant") is True],
                     "answer": answer or None,
                     "requests": explode(p["prefix_id"], answer, cap) if res.status == "ok" else []})
    ctx.write("relevance", rows, dimensions_sha256=sha256_file(prompt_path("dimensions")))
