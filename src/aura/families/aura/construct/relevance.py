"""Stage relevance (P2): which of RS1-RS6 / SD1-SD5 can be varied for each prefix (groundedness
rule: the prefix already has a concrete element along the dimension), exploded into one candidate
request per (prefix, relevant dimension), capped by `aura.construct.max_dimensions_per_prefix`.

Under a cap, each prefix keeps the relevant dimensions the run has used least so far (ties in RS1..SD5
order), prefixes taken in input order: a capped run spreads its variations over the dimensions instead of
always varying the first relevant one (RS1). Without a cap every relevant dimension is kept."""
from __future__ import annotations

from collections import Counter

from aura.io import sha256_file
from aura.pipeline.context import StageContext
from aura.prompts import prompt_path

from ..data.trajectory import render_indexed
from .common import DIMENSIONS, dimensions_text, prompt, request

# P2 v3 asks only for the relevant dimensions (code + element): the model decides which levers exist and
# names each one, and the eleven "not relevant" entries of v2 are no longer written out. Same decision,
# about a ninth of the output tokens on the embedded model (docs/measurements.md: 290 vs 3,309).
RELEVANCE_SCHEMA = {
    "type": "object",
    "properties": {
        "relevant": {
            "type": "array", "maxItems": len(DIMENSIONS),
            "items": {"type": "object",
                      "properties": {"code": {"type": "string", "enum": DIMENSIONS},
                                     "element": {"type": "string", "minLength": 1, "maxLength": 120}},
                      "required": ["code", "element"], "additionalProperties": False},
        },
    },
    "required": ["relevant"],
    "additionalProperties": False,
}


def elements(answer: dict) -> dict[str, str]:
    """code -> element for the relevant dimensions, in canonical RS1..SD5 order. A code listed twice keeps
    its first element (the schema cannot forbid repeats; `repeated_codes` reports them)."""
    first: dict[str, str] = {}
    for entry in answer.get("relevant") or []:
        first.setdefault(entry["code"], entry["element"])
    return {c: first[c] for c in DIMENSIONS if c in first}


def repeated_codes(answer: dict) -> list[str]:
    codes = [e["code"] for e in answer.get("relevant") or []]
    return sorted({c for c in codes if codes.count(c) > 1}, key=DIMENSIONS.index)


def relevant_dimensions(answer: dict) -> list[str]:
    return list(elements(answer))


def explode(prefix_id: str, answer: dict, cap: int | None, used: Counter | None = None) -> list[dict]:
    """Candidate requests in canonical dimension order. Under a cap, keep the `cap` relevant dimensions
    with the lowest count in `used` (dimensions already requested for earlier prefixes; ties in canonical
    order), and add the kept ones to `used`."""
    named = elements(answer)
    relevant = list(named)
    if cap is not None:
        used = Counter() if used is None else used
        keep = set(sorted(relevant, key=lambda c: (used[c], DIMENSIONS.index(c)))[:cap])
        relevant = [c for c in relevant if c in keep]
        used.update(relevant)
    return [{"request_id": f"{prefix_id}@{c}", "prefix_id": prefix_id, "dimension": c,
             "element": named[c]} for c in relevant]


def run(ctx: StageContext) -> None:
    p2 = ctx.use_prompt(prompt("p2_dimension_relevance"))
    prefixes = ctx.read("prefixes")
    seeds = {s["seed_id"]: s for s in ctx.read("seeds")}
    model = ctx.config.raw["aura"]["roles"]["generator"]
    dims = dimensions_text()
    reqs = [request(p2, p["prefix_id"], RELEVANCE_SCHEMA, "dimension_relevance",
                    profile=seeds[p["seed_id"]]["profile"] or "", trajectory=render_indexed(p["steps"]),
                    risk_description=seeds[p["seed_id"]]["risk_description"], dimensions=dims) for p in prefixes]
    with ctx.llm([model]) as llm:
        results = llm.run("generator", model, reqs)
    cap = ctx.config.raw["aura"]["construct"]["max_dimensions_per_prefix"]
    used: Counter = Counter()
    rows = []
    for p, res in zip(prefixes, results):
        answer = res.parsed or {}
        rows.append({"prefix_id": p["prefix_id"], "seed_id": p["seed_id"], "status": res.status, "error": res.error,
                     "relevant": relevant_dimensions(answer), "repeated_codes": repeated_codes(answer),
                     "answer": answer or None,
                     "requests": explode(p["prefix_id"], answer, cap, used) if res.status == "ok" else []})
    ctx.write("relevance", rows, dimensions_sha256=sha256_file(prompt_path("dimensions")))
