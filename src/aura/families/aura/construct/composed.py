"""Composed mechanisms (AURA future work, issue 13 §5): variations that move two risk dimensions at once.

The paper varies one mechanism at a time. This experiment, off by default (`aura.construct.composed.enabled`),
takes each configured pair (A, B) of RS dimensions and every prefix on which P2 found both A and B
groundable, and builds the 2x2 design on that prefix: the original, the single variations A and B (the
main run's own P3/P4 requests, so a warm cache answers them), and the composed variation AxB (label
`composition_label`, e.g. `RS2xRS5`) generated directly from the original by a new prompt. Its outputs
are separate files; the main dataset and its tables do not change.

Generation is edit-based exactly like `variations`: the generator answers with {step, content,
dimensions} edits to user/environment steps, the code splices them in, so agent steps and the prefix
length are kept by construction; the checks still run (edit checks, frozen-agent-step check on the
spliced prefix) plus one of its own: the edits' `dimensions` tags together cover both targets.
Review reuses the review schema and rows (`review.review_schema`, `review._row`) with the composed
criteria (both dimensions changed, non-targets preserved, agent steps preserved, coherent); single
variations are reviewed with P5/P6 as in the main run. Classification reuses P7 and its checks.
"""
from __future__ import annotations

from collections import Counter

from aura.errors import ConfigError
from aura.llm import LLMRequest
from aura.pipeline.context import StageContext
from aura.prompts import Prompt

from ..data.trajectory import render_indexed
from ..settings import role_models
from . import classify, finalize, review, variations
from .common import RS, dimension_specs, majority_accept, outcome, prompt, request, run_with_rule_checks, vote
from .relevance import elements

COMPOSED_CRITERIA = ["first_dimension_changed", "second_dimension_changed", "non_target_preserved",
                     "agent_steps_preserved", "coherent"]
SEP = "x"


def composition_label(a: str, b: str) -> str:
    return f"{a}{SEP}{b}"


def parts(dimension: str) -> list[str]:
    """The RS codes a dimension label stands for: ['RS2'] or, for 'RS2xRS5', ['RS2', 'RS5']."""
    return dimension.split(SEP)


def is_composed(dimension: str) -> bool:
    return len(parts(dimension)) == 2


def canonical_pairs(pairs: list[list[str]]) -> list[tuple[str, str]]:
    """Configured pairs in RS1..RS6 order within each pair, duplicates dropped, first-seen order kept.
    A pair of one dimension with itself, or a code outside RS1-RS6, stops with one line."""
    out: list[tuple[str, str]] = []
    for pair in pairs:
        a, b = pair
        if a == b or a not in RS or b not in RS:
            raise ConfigError(f"aura.construct.composed.pairs: {pair} is not two different codes of {', '.join(RS)}")
        key = tuple(sorted((a, b), key=RS.index))
        if key not in out:
            out.append(key)
    return out


def settings(config) -> dict:
    return config.section("aura")["construct"]["composed"]


# --- generation -------------------------------------------------------------------------------

def composed_schema(steps: list[dict], dims: tuple[str, str]) -> dict:
    """`variations.variation_schema` whose edits also carry `dimensions`: the target codes each moves."""
    schema = variations.variation_schema(steps)
    edit = schema["properties"]["edits"]["items"]
    edit["properties"]["dimensions"] = {"type": "array", "items": {"enum": list(dims)}, "minItems": 1,
                                        "maxItems": 2, "uniqueItems": True}
    edit["required"] = [*edit["required"], "dimensions"]
    return schema


def composed_violation(steps: list[dict], edits: list[dict], dims: tuple[str, str]) -> str | None:
    """Why a composed answer cannot be spliced into `steps`: the edit checks, then every target covered by
    some edit's tag, then the frozen-agent-step check on the spliced prefix (same step count and roles,
    agent steps identical, something changed)."""
    why = variations.edit_violation(steps, edits)
    if why:
        return why
    tagged = {d for e in edits for d in (e.get("dimensions") or [])}
    missing = [d for d in dims if d not in tagged]
    if missing:
        return (f"dimension_not_covered: no edit is tagged {', '.join(missing)}; "
                f"the edits together must move both {dims[0]} and {dims[1]}")
    return variations.spliced_violation(steps, edits)


def composed_request(p: Prompt, request_id: str, steps: list[dict], seed: dict, dims: tuple[str, str],
                     named: dict[str, str]) -> LLMRequest:
    specs = dimension_specs()
    (a, b) = dims
    return request(p, request_id, composed_schema(steps, dims), "composed_variation_edits",
                   profile=seed["profile"] or "", steps=render_indexed(steps),
                   editable_steps=", ".join(map(str, variations.editable(steps))),
                   risk_description=seed["risk_description"],
                   first_dimension=a, first_definition=f"{specs[a]['definition']} Direction: {specs[a]['direction']}",
                   first_element=named[a],
                   second_dimension=b, second_definition=f"{specs[b]['definition']} Direction: {specs[b]['direction']}",
                   second_element=named[b])


def candidates(relevance_rows: list[dict], pairs: list[tuple[str, str]]) -> list[dict]:
    """Requests of the 2x2 design: for each prefix whose P2 answer names both dimensions of a pair, the
    singles A and B (ids `<prefix>@A`, as the main run names them; one request each even when several pairs
    share it) and the composition `<prefix>@AxB`."""
    out: dict[str, dict] = {}
    for row in relevance_rows:
        if row["status"] != "ok":
            continue
        named = elements(row["answer"] or {})
        for a, b in pairs:
            if a not in named or b not in named:
                continue
            label = composition_label(a, b)
            for dim in (a, b, label):
                rid = f"{row['prefix_id']}@{dim}"
                entry = out.setdefault(rid, {"request_id": rid, "prefix_id": row["prefix_id"], "dimension": dim,
                                             "element": named.get(dim, ""), "named": named, "compositions": []})
                entry["compositions"].append(label)
    return list(out.values())


def run_variations(ctx: StageContext) -> None:
    """Stage composed-variations: singles and compositions of the configured pairs, spliced and checked."""
    pairs = canonical_pairs(settings(ctx.config)["pairs"])
    p3 = ctx.use_prompt(prompt("p3_harm_intensity_variation"))
    p4 = ctx.use_prompt(prompt("p4_contextual_variation"))
    pc = ctx.use_prompt(prompt("composed_variation"))
    prefixes = {p["prefix_id"]: p for p in ctx.read("prefixes")}
    seeds = {s["seed_id"]: s for s in ctx.read("seeds")}
    cands = candidates(ctx.read("relevance"), pairs)
    sources = [prefixes[c["prefix_id"]]["steps"] for c in cands]
    reqs, checks = [], []
    for c, steps in zip(cands, sources):
        seed = seeds[prefixes[c["prefix_id"]]["seed_id"]]
        if is_composed(c["dimension"]):
            dims = tuple(parts(c["dimension"]))
            reqs.append(composed_request(pc, c["request_id"], steps, seed, dims, c["named"]))
            checks.append(lambda a, s=steps, d=dims: composed_violation(s, a["edits"], d))
        else:
            reqs.append(variations.build_request(c, steps, seed, p3, p4))
            checks.append(lambda a, s=steps: variations.spliced_violation(s, a["edits"]))
    model = ctx.config.raw["aura"]["roles"]["generator"]
    with ctx.llm([model]) as llm:
        results, violations, attempts = run_with_rule_checks(
            llm, "generator", model, reqs, lambda i, a: checks[i](a), ctx.config.raw["aura"]["construct"]["rule_tries"])
    rows, reasons = [], Counter()
    for c, src, res, why, n in zip(cands, sources, results, violations, attempts):
        pre = prefixes[c["prefix_id"]]
        answer = res.parsed or {}
        status = outcome(res.status, why)
        reasons[status if status != "rejected" else f"rejected:{why.split(':')[0]}"] += 1
        rows.append({"variation_id": c["request_id"], "prefix_id": c["prefix_id"], "seed_id": pre["seed_id"],
                     "prefix_kind": pre["prefix_kind"], "dimension": c["dimension"],
                     "compositions": c["compositions"], "status": status,
                     "reason": (why or res.error) if status != "ok" else None, "attempts": n,
                     "edits": answer.get("edits"),
                     "steps": variations.splice(src, answer["edits"]) if status == "ok" else None,
                     "change_summary": answer.get("change_summary"), "risk_description": answer.get("risk_description"),
                     "raw": res.text if status != "ok" else None})
    ctx.write("variations", rows, outcomes=dict(sorted(reasons.items())), pairs=[list(p) for p in pairs])


# --- review -----------------------------------------------------------------------------------

def criteria_of(dimension: str) -> list[str]:
    return COMPOSED_CRITERIA if is_composed(dimension) else review.VARIATION_CRITERIA


def review_request(v: dict, original: list[dict], seed: dict, prompts: dict[str, Prompt]) -> LLMRequest:
    """The review request of one variation row: P5 (RS1) / P6 for a single, as the main run asks them, and
    the composed review prompt for a composition."""
    specs, dim = dimension_specs(), v["dimension"]
    common = {"original_steps": variations.steps_json(original), "variation_steps": variations.steps_json(v["steps"]),
              "change_summary": v["change_summary"] or ""}
    schema = review.review_schema(criteria_of(dim))
    if is_composed(dim):
        a, b = parts(dim)
        return request(prompts["composed"], v["variation_id"], schema, "composed_variation_review",
                       first_dimension=a, first_definition=specs[a]["definition"],
                       second_dimension=b, second_definition=specs[b]["definition"], **common)
    if dim == "RS1":
        return request(prompts["p5"], v["variation_id"], schema, "variation_review",
                       risk_description=seed["risk_description"], **common)
    return request(prompts["p6"], v["variation_id"], schema, "variation_review", dimension=dim,
                   definition=specs[dim]["definition"], **common)


def run_review(ctx: StageContext) -> None:
    """Stage composed-review: one reviewer (`--model`) on every variation row that passed the code checks."""
    prompts = {"p5": ctx.use_prompt(prompt("p5_harm_intensity_review")),
               "p6": ctx.use_prompt(prompt("p6_contextual_review")),
               "composed": ctx.use_prompt(prompt("composed_review"))}
    prefixes = {p["prefix_id"]: p for p in ctx.read("prefixes")}
    seeds = {s["seed_id"]: s for s in ctx.read("seeds")}
    todo = [v for v in ctx.read("variations") if v["status"] == "ok"]
    reqs = [review_request(v, prefixes[v["prefix_id"]]["steps"], seeds[v["seed_id"]], prompts) for v in todo]
    with ctx.llm([ctx.model]) as llm:
        results = llm.run("reviewer", ctx.model, reqs)
    ctx.write("review", [{**review._row(v["variation_id"], "variation_id", ctx.model, r), "dimension": v["dimension"]}
                         for v, r in zip(todo, results)])


# --- classification and the experiment's item set ---------------------------------------------

def pool(ctx: StageContext) -> list[dict]:
    """The originals of every prefix in the design, plus the variations a reviewer majority kept (each
    judged on its own criteria: the composed ones on both dimensions)."""
    seeds = {s["seed_id"]: s for s in ctx.read("seeds")}
    panel = len(role_models(ctx.config, "reviewers"))
    rows = ctx.read("variations")
    in_design: dict[str, set[str]] = {}
    for v in rows:
        in_design.setdefault(v["prefix_id"], set()).update(v["compositions"])
    items = [{"item_key": f"{p['prefix_id']}@original", "seed_id": p["seed_id"], "prefix_id": p["prefix_id"],
              "prefix_kind": p["prefix_kind"], "dimension": "original", "compositions": sorted(in_design[p["prefix_id"]]),
              "steps": p["steps"], "risk_description": seeds[p["seed_id"]]["risk_description"], "review_votes": None}
             for p in ctx.read("prefixes") if p["prefix_id"] in in_design]
    votes = classify.collect_votes(ctx)
    for v in rows:
        if v["status"] != "ok":
            continue
        cast = votes.get(v["variation_id"], [])
        if majority_accept([vote(r, criteria_of(v["dimension"])) for r in cast], panel):
            items.append({"item_key": v["variation_id"], "seed_id": v["seed_id"], "prefix_id": v["prefix_id"],
                          "prefix_kind": v["prefix_kind"], "dimension": v["dimension"], "compositions": v["compositions"],
                          "steps": v["steps"],
                          "risk_description": v["risk_description"] or seeds[v["seed_id"]]["risk_description"],
                          "review_votes": {r["reviewer"]: r["verdict"] for r in cast}})
    return items


def run_classify(ctx: StageContext) -> None:
    """Stage composed-classify: P7 on the design's items (the main run's requests for originals and singles),
    written as `classified` (every item, with its status) and `dataset` (the labelled items in the released
    dataset's row shape, plus `prefix_id` and `compositions`), which the evaluation stages read."""
    p7 = ctx.use_prompt(prompt("p7_pair_classification"))
    seeds = {s["seed_id"]: s for s in ctx.read("seeds")}
    items = pool(ctx)
    model = ctx.config.raw["aura"]["roles"]["classifier"]
    reqs = [request(p7, it["item_key"], classify.CLASSIFY_SCHEMA, "pair_classification",
                    profile=seeds[it["seed_id"]]["profile"] or "", trajectory=render_indexed(it["steps"]),
                    risk_description=it["risk_description"]) for it in items]
    with ctx.llm([model]) as llm:
        results, violations, attempts = run_with_rule_checks(
            llm, "classifier", model, reqs, lambda i, a: classify.label_violation(a),
            ctx.config.raw["aura"]["construct"]["rule_tries"])
    classified, dataset = [], []
    for it, res, why, n in zip(items, results, violations, attempts):
        a = res.parsed or {}
        status = outcome(res.status, why)
        classified.append({**it, "status": status, "reason": why or res.error, "attempts": n,
                           "pair_label": a.get("pair_label"), "rationale": a.get("risk_rationale"),
                           "safe_action_sketches": a.get("safe_action_sketches") or [],
                           "unsafe_action_explanation": a.get("unsafe_action_explanation") or "",
                           "pair_edit_grade": a.get("pair_edit_grade")})
        if status == "ok":
            row = finalize._row(seeds[it["seed_id"]], side="source", prefix_kind=it["prefix_kind"],
                                dimension=it["dimension"], label=a["pair_label"], steps=it["steps"],
                                rationale=a["risk_rationale"], sketches=a.get("safe_action_sketches") or [],
                                unsafe=a.get("unsafe_action_explanation") or "", item_key=it["item_key"],
                                grade=a.get("pair_edit_grade"))
            dataset.append({**row, "prefix_id": it["prefix_id"], "compositions": it["compositions"]})
    dataset.sort(key=lambda r: r["item_id"])
    ctx.write("classified", classified)
    ctx.write("dataset", dataset, items_by_dimension=dict(sorted(Counter(r["dimension"] for r in dataset).items())))
