"""Stage finalize: the released dataset (one row per evaluation item), exclusions with reasons,
and a data card. Item ids derive from content identity (seed, prefix kind, dimension, pair side),
never from row order, so they are stable across reruns."""
from __future__ import annotations

from collections import Counter

from ..data.trajectory import render_steps, user_instruction
from ..io import atomic_write_text, read_jsonl, sha256_text
from ..pipeline.context import StageContext
from .common import majority_accept, vote
from .review import PAIR_CRITERIA


def item_id(seed_id: str, prefix_kind: str, dimension: str, pair_side: str) -> str:
    return "it_" + sha256_text(f"{seed_id}|{prefix_kind}|{dimension}|{pair_side}")[:16]


def pair_id(seed_id: str, prefix_kind: str, dimension: str) -> str:
    return "pr_" + sha256_text(f"{seed_id}|{prefix_kind}|{dimension}")[:16]


def _row(seed: dict, *, side: str, prefix_kind: str, dimension: str, label: str, steps: list[dict], rationale: str,
         sketches: list[str], unsafe: str, item_key: str) -> dict:
    return {
        "item_id": item_id(seed["seed_id"], prefix_kind, dimension, side),
        "item_key": item_key,
        "seed_id": seed["seed_id"],
        "domain": seed["domain"],
        "source_label": seed["source_label"],
        "prefix_kind": prefix_kind,
        "dimension": dimension,
        "pair_label": label,
        "pair_id": None,
        "pair_role": None,
        "rationale": rationale,
        "safe_action_sketches": sketches,
        "unsafe_action_explanation": unsafe,
        "profile": seed["profile"],
        "user_instruction": user_instruction(steps),
        "steps": steps,
        "model_input": render_steps(steps),
    }


def accepted_pairs(ctx: StageContext) -> tuple[dict[str, dict], dict[str, dict]]:
    """pair candidates kept by reviewer majority, by source item key; and every candidate's votes."""
    votes: dict[str, list[dict]] = {}
    for name, path in ctx.inputs.items():
        if name.startswith("pair_reviews"):
            for r in read_jsonl(path):
                votes.setdefault(r["pair_candidate_id"], []).append(r)
    panel = len(ctx.config.role_models("reviewers"))
    kept, all_votes = {}, {}
    for p in ctx.read("pairs"):
        cast = votes.get(p["pair_candidate_id"], [])
        all_votes[p["pair_candidate_id"]] = {r["reviewer"]: r["verdict"] for r in cast}
        if p["status"] == "ok" and majority_accept([vote(r, PAIR_CRITERIA) for r in cast], panel):
            kept[p["source_item_key"]] = p
    return kept, all_votes


def build(ctx: StageContext) -> tuple[list[dict], list[dict]]:
    seeds = {s["seed_id"]: s for s in ctx.read("seeds")}
    rows, excluded = [], []
    for t in ctx.read("tags"):
        if t["status"] != "ok":
            excluded.append({"stage": "tag", "key": t["seed_id"], "reason": f"{t['status']}: {t['reason']}"})
    pairs, _ = accepted_pairs(ctx)
    for c in ctx.read("classified"):
        if c["status"] != "ok":
            excluded.append({"stage": "classify", "key": c["item_key"], "reason": f"{c['status']}: {c['reason']}"})
            continue
        seed = seeds[c["seed_id"]]
        if not user_instruction(c["steps"]).strip():
            excluded.append({"stage": "finalize", "key": c["item_key"], "reason": "no user request in the prefix"})
            continue
        src = _row(seed, side="source", prefix_kind=c["prefix_kind"], dimension=c["dimension"], label=c["pair_label"],
                   steps=c["steps"], rationale=c["rationale"], sketches=c["safe_action_sketches"],
                   unsafe=c["unsafe_action_explanation"], item_key=c["item_key"])
        rows.append(src)
        p = pairs.get(c["item_key"])
        if p is None:
            continue
        if not user_instruction(p["steps"]).strip():
            excluded.append({"stage": "finalize", "key": p["pair_candidate_id"], "reason": "no user request in the prefix"})
            continue
        other = _row(seed, side="counterpart", prefix_kind=c["prefix_kind"], dimension=c["dimension"],
                     label=p["target_label"], steps=p["steps"], rationale=p["rationale"],
                     sketches=p["safe_action_sketches"], unsafe=p["unsafe_action_explanation"],
                     item_key=p["pair_candidate_id"])
        pid = pair_id(seed["seed_id"], c["prefix_kind"], c["dimension"])
        src.update(pair_id=pid, pair_role="source")
        other.update(pair_id=pid, pair_role="counterpart")
        rows.append(other)
    rows.sort(key=lambda r: r["item_id"])
    return rows, excluded


def data_card(rows: list[dict], excluded: list[dict], prov: dict) -> str:
    def table(counter: Counter, head: str) -> str:
        lines = [f"| {head} | rows |", "|---|---:|"]
        lines += [f"| {k} | {v} |" for k, v in sorted(counter.items(), key=lambda kv: str(kv[0]))]
        return "\n".join(lines)

    paired = [r for r in rows if r["pair_id"]]
    return f"""# AURA-Eval dataset card

Built by `python -m aura finalize` (config hash `{prov['config_hash'][:12]}`, git `{(prov['git']['revision'] or 'unknown')[:12]}`{' dirty' if prov['git']['dirty'] else ''}).
One row per evaluation item: the evaluated model sees `profile` and `model_input` only.

## Counts
- rows: {len(rows)} ({sum(r['dimension'] == 'original' for r in rows)} original-scenario, {sum(r['dimension'] != 'original' for r in rows)} controlled-variation)
- paired rows: {len(paired)} in {len({r['pair_id'] for r in paired})} pairs; unpaired rows: {len(rows) - len(paired)}
- excluded: {len(excluded)} (see `exclusions.jsonl`: {dict(Counter(e['stage'] for e in excluded))})

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
| pair_id, pair_role | links the two sides of an accepted minimal-flip pair (`source`, `counterpart`); null if unpaired |
| rationale | reference risk rationale (only the safety judge sees it) |
| safe_action_sketches | SP: executable safe fulfilling actions with the shown tools |
| unsafe_action_explanation | NSP: why direct fulfilment is unsafe |
| profile, user_instruction | the agent's system profile; the first user request |
| steps | the prefix as structured steps (`user`/`environment` content, `agent` thought+action) |
| model_input | the prefix rendered as the evaluated model sees it |
"""


def run(ctx: StageContext) -> None:
    rows, excluded = build(ctx)
    ctx.write("dataset", rows)
    if "exclusions" in ctx.outputs:
        ctx.write("exclusions", excluded)
    if "card" in ctx.outputs:
        from ..provenance import provenance

        atomic_write_text(ctx.outputs["card"], data_card(rows, excluded, provenance("finalize", ctx.config)))
