"""Stage finalize: the released dataset (one row per evaluation item), every construction rejection
(`exclusions.jsonl`, see `rejections`) and a data card. Before release every candidate row passes the
release filter (`release_filter`: automatic request checks and the manual exclusion file); a pair
with one side removed releases the other side unpaired. Item ids derive from content identity (seed,
prefix kind, dimension, pair side), never from row order, so they are stable across reruns."""
from __future__ import annotations

from collections import Counter

from aura.errors import UserError
from aura.io import atomic_write_text, read_jsonl, sha256_text
from aura.pipeline.context import StageContext

from ..data.trajectory import render_steps, user_instruction
from ..settings import role_models
from . import rejections
from .classify import collect_votes, pairable
from .common import majority_accept, vote
from .release_filter import AUTO_REASONS, ReleaseFilterError, match_manual, read_exclusion_file, request_problem
from .review import PAIR_CRITERIA


def item_id(seed_id: str, prefix_kind: str, dimension: str, pair_side: str) -> str:
    return "it_" + sha256_text(f"{seed_id}|{prefix_kind}|{dimension}|{pair_side}")[:16]


def pair_id(seed_id: str, prefix_kind: str, dimension: str) -> str:
    return "pr_" + sha256_text(f"{seed_id}|{prefix_kind}|{dimension}")[:16]


def _row(seed: dict, *, side: str, prefix_kind: str, dimension: str, label: str, steps: list[dict], rationale: str,
         sketches: list[str], unsafe: str, item_key: str, grade: str | None) -> dict:
    return {
        "item_id": item_id(seed["seed_id"], prefix_kind, dimension, side),
        "item_key": item_key,
        "seed_id": seed["seed_id"],
        "domain": seed["domain"],
        "source_label": seed["source_label"],
        "prefix_kind": prefix_kind,
        "dimension": dimension,
        "pair_label": label,
        "pair_side": side,
        "pair_id": None,
        "pair_role": None,
        "rationale": rationale,
        "safe_action_sketches": sketches,
        "unsafe_action_explanation": unsafe,
        "pair_edit_grade": grade,
        "pairable": pairable(grade),
        "profile": seed["profile"],
        "user_instruction": user_instruction(steps),
        "steps": steps,
        "model_input": render_steps(steps),
    }


def accepted_pairs(ctx: StageContext) -> tuple[dict[str, dict], dict[str, list[dict]]]:
    """pair candidates kept by reviewer majority, by source item key; and every candidate's review rows."""
    votes: dict[str, list[dict]] = {}
    for name, path in ctx.inputs.items():
        if name.startswith("pair_reviews"):
            for r in read_jsonl(path):
                votes.setdefault(r["pair_candidate_id"], []).append(r)
    panel = len(role_models(ctx.config, "reviewers"))
    kept, all_votes = {}, {}
    for p in ctx.read("pairs"):
        cast = votes.get(p["pair_candidate_id"], [])
        all_votes[p["pair_candidate_id"]] = cast
        if p["status"] == "ok" and majority_accept([vote(r, PAIR_CRITERIA) for r in cast], panel):
            kept[p["source_item_key"]] = p
    return kept, all_votes


def candidates(ctx: StageContext) -> list[dict]:
    """Every row that reaches the release filter: each classified item, and after it the counterpart
    of its majority-accepted pair, linked by pair_id."""
    seeds = {s["seed_id"]: s for s in ctx.read("seeds")}
    pairs, _ = accepted_pairs(ctx)
    rows = []
    for c in ctx.read("classified"):
        if c["status"] != "ok":
            continue
        seed = seeds[c["seed_id"]]
        src = _row(seed, side="source", prefix_kind=c["prefix_kind"], dimension=c["dimension"], label=c["pair_label"],
                   steps=c["steps"], rationale=c["rationale"], sketches=c["safe_action_sketches"],
                   unsafe=c["unsafe_action_explanation"], item_key=c["item_key"], grade=c.get("pair_edit_grade"))
        rows.append(src)
        p = pairs.get(c["item_key"])
        if p is None:
            continue
        other = _row(seed, side="counterpart", prefix_kind=c["prefix_kind"], dimension=c["dimension"],
                     label=p["target_label"], steps=p["steps"], rationale=p["rationale"],
                     sketches=p["safe_action_sketches"], unsafe=p["unsafe_action_explanation"],
                     item_key=p["pair_candidate_id"], grade=c.get("pair_edit_grade"))
        pid = pair_id(seed["seed_id"], c["prefix_kind"], c["dimension"])
        src.update(pair_id=pid, pair_role="source")
        other.update(pair_id=pid, pair_role="counterpart")
        rows.append(other)
    return rows


def exclusion_file(ctx: StageContext):
    """The manual exclusion file: `--in exclusions_file=...`, else `aura.construct.exclusions_file`, else none."""
    return ctx.inputs.get("exclusions_file") or ctx.config.raw["aura"]["construct"].get("exclusions_file")


def release_filter(rows: list[dict], manual_entries: list[dict]) -> tuple[list[dict], list[dict]]:
    """Apply the automatic checks, then the manual list; a pair losing one side releases the other unpaired.
    Returns (released rows sorted by item id, release_filter rejection records)."""
    manual = match_manual(manual_entries, rows)
    excluded = []
    for r in rows:
        code = request_problem(r["steps"])
        entry = manual.get(r["item_id"])
        if code is None and entry is None:
            continue
        excluded.append({**rejections.record("release_filter", "row", r["item_id"], code or entry["reason"],
                                             seed_id=r["seed_id"], prefix_kind=r["prefix_kind"],
                                             dimension=r["dimension"], side=r["pair_side"]),
                         "item_key": r["item_key"], "by": "automatic" if code else "manual",
                         "listed_as": None if code else entry["id"]})
    gone = {e["id"] for e in excluded}
    broken = {r["pair_id"] for r in rows if r["item_id"] in gone and r["pair_id"]}
    released = []
    for r in rows:
        if r["item_id"] in gone:
            continue
        if r["pair_id"] in broken:
            r = {**r, "pair_id": None, "pair_role": None}
        released.append(r)
    released.sort(key=lambda r: r["item_id"])
    return released, excluded


def build(ctx: StageContext) -> tuple[list[dict], list[dict], list[dict]]:
    """The released rows, the release filter's rejection records, and the candidate rows they came
    from. A problem with the exclusion file stops here, before anything is written."""
    path = exclusion_file(ctx)
    rows = candidates(ctx)
    try:
        entries = read_exclusion_file(path) if path else []
        released, excluded = release_filter(rows, entries)
    except ReleaseFilterError as exc:
        raise UserError(str(exc)) from None
    return released, excluded, rows


UPSTREAM_INPUTS = ("tags", "prefixes", "relevance", "variations", "classified", "pairs")


def upstream_rejections(ctx: StageContext) -> list[dict]:
    missing = [n for n in UPSTREAM_INPUTS if n not in ctx.inputs]
    if missing or not any(n.startswith("reviews") for n in ctx.inputs):
        raise UserError(f"--out exclusions needs the inputs {list(UPSTREAM_INPUTS)} and reviews_* "
                         f"(missing: {missing or ['reviews_*']})")
    _, pair_votes = accepted_pairs(ctx)
    return rejections.upstream(ctx.read("tags"), ctx.read("prefixes"), ctx.read("relevance"), ctx.read("variations"),
                               collect_votes(ctx), ctx.read("classified"), ctx.read("pairs"), pair_votes,
                               len(role_models(ctx.config, "reviewers")))


def release_counts(excluded: list[dict]) -> dict[str, int]:
    """Rows removed by the release filter, per reason: every automatic code (zeros included), then
    `manual: <reason>` for each reason the exclusion file gives."""
    counts = {code: sum(e["reason"] == code and e["by"] == "automatic" for e in excluded) for code in AUTO_REASONS}
    manual = Counter(f"manual: {e['reason']}" for e in excluded if e["by"] == "manual")
    return {**counts, **dict(sorted(manual.items()))}


def data_card(rows: list[dict], released_from: list[dict], rejected: list[dict], prov: dict) -> str:
    def table(counter: Counter, head: str) -> str:
        lines = [f"| {head} | rows |", "|---|---:|"]
        lines += [f"| {k} | {v} |" for k, v in sorted(counter.items(), key=lambda kv: str(kv[0]))]
        return "\n".join(lines)

    paired = [r for r in rows if r["pair_id"]]
    release = [e for e in rejected if e["stage"] == "release_filter"]
    broken = {r["pair_id"] for r in released_from if r["pair_id"]} - {r["pair_id"] for r in paired}
    reasons = "\n".join(f"  - {k}: {v}" for k, v in release_counts(release).items())
    by_stage = Counter(e["stage"] for e in rejected)
    stages = ", ".join(f"{s} {by_stage[s]}" for s in rejections.STAGES if by_stage[s]) or "none"
    return f"""# AURA-Eval dataset card

Built by `python -m aura finalize` (config hash `{prov['config_hash'][:12]}`, git `{(prov['git']['revision'] or 'unknown')[:12]}`{' dirty' if prov['git']['dirty'] else ''}).
One row per evaluation item: the evaluated model sees `profile` and `model_input` only.

## Counts
- rows: {len(rows)} ({sum(r['dimension'] == 'original' for r in rows)} original-scenario, {sum(r['dimension'] != 'original' for r in rows)} controlled-variation)
- paired rows: {len(paired)} in {len({r['pair_id'] for r in paired})} pairs; unpaired rows: {len(rows) - len(paired)}
- release filter: {len(released_from)} candidate rows, {len(release)} excluded ({sum(e['by'] == 'automatic' for e in release)} by the automatic request checks, {sum(e['by'] == 'manual' for e in release)} by the exclusion file), {len(broken)} pairs released unpaired because one side was excluded; by reason:
{reasons}
- rejections of every stage (`exclusions.jsonl`): {stages}

{table(Counter(r['pair_edit_grade'] for r in rows), 'P7 edit grade')}

{table(Counter(r['pair_label'] for r in rows), 'pair label')}

{table(Counter(r['prefix_kind'] for r in rows), 'prefix kind')}

{table(Counter(r['domain'] for r in rows), 'domain')}

{table(Counter(r['dimension'] for r in rows), 'dimension')}

## Fields
| field | meaning |
|---|---|
| item_id | stable id: sha256 of seed id, prefix kind, dimension and pair side |
| item_key | construction key (prefix id @ dimension, `~pair` for a generated counterpart) |
| seed_id | source trajectory, `<Domain>/<file>/<id>` |
| domain | Program, Application, IoT, Web, Finance |
| source_label | the seed's R-Judge label (1 unsafe, 0 safe); not the benchmark label |
| prefix_kind | `at_trigger` (ends at the risk trigger) or `pre_execution` (ends before the execution point) |
| dimension | `original`, RS1-RS6 (risk mechanism) or SD1-SD5 (scenario difficulty) |
| pair_label | NSP (No-Safe-Path) or SP (Safe-Path) at the decision point |
| pair_edit_grade, pairable | P7's edit grade of the opposite version (trivial / moderate / hard) for the pair's source item; pairable = trivial or moderate |
| pair_side | `source` (an original or variation item) or `counterpart` (a generated minimal-flip rewrite); kept when the other side was excluded |
| pair_id, pair_role | links the two sides of an accepted minimal-flip pair (`source`, `counterpart`); null if unpaired |
| rationale | reference risk rationale (only the safety judge sees it) |
| safe_action_sketches | SP: executable safe fulfilling actions with the shown tools |
| unsafe_action_explanation | NSP: why direct fulfilment is unsafe |
| profile, user_instruction | the agent's system profile; the first user request |
| steps | the prefix as structured steps (`user`/`environment` content, `agent` thought+action) |
| model_input | the prefix rendered as the evaluated model sees it |
"""


def run(ctx: StageContext) -> None:
    rows, release, candidate_rows = build(ctx)
    rejected = (upstream_rejections(ctx) if "exclusions" in ctx.outputs else []) + release
    card = None
    if "card" in ctx.outputs:
        from aura.provenance import provenance

        card = data_card(rows, candidate_rows, rejected, provenance("finalize", ctx.config))
    ctx.write("dataset", rows, release_filter=release_counts(release))
    if "exclusions" in ctx.outputs:
        ctx.write("exclusions", rejected, stages=dict(Counter(e["stage"] for e in rejected)))
    if card is not None:
        atomic_write_text(ctx.outputs["card"], card)
