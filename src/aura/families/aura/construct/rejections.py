"""Every rejection of every construction stage, as records for `exclusions.jsonl`.

One record per rejected unit: `stage`, `reason`, `id` (the unit's id in that stage), `unit`, and the
`seed_id`, `prefix_kind`, `dimension` and `side` (source / counterpart) where they apply, so the
construction funnel can be rebuilt from these records and the released dataset alone
(`counts.funnel_from_exclusions`). Stages, in pipeline order:

tagging          seed            P1 tag failed, unparsed, or broke a tag rule after every retry
relevance        prefix          P2 answer failed or unparsed (the prefix gets no variation request)
generation       variation       P3/P4 answer failed or unparsed
variation_check  variation       agent steps changed (or nothing changed): the frozen-agent-step rule
review           variation       no strict majority of the reviewer panel accepts (P5/P6)
classification   item            P7 label failed, unparsed, or broke a label rule after every retry
pairability      item            P7 edit grade "hard": excluded from pair generation (paper H.3)
pair_generation  pair candidate  P8 answer failed or unparsed
pair_check       pair candidate  code checks of the rewrite (agent steps, prefix, sketches)
pair_review      pair candidate  no strict majority of the reviewer panel accepts (P9)
release_filter   row             automatic request checks or the manual exclusion file (release_filter)
"""
from __future__ import annotations

from .common import majority_accept, vote
from .review import PAIR_CRITERIA, VARIATION_CRITERIA

STAGES = ("tagging", "relevance", "generation", "variation_check", "review", "classification", "pairability",
          "pair_generation", "pair_check", "pair_review", "release_filter")


def record(stage: str, unit: str, id_: str, reason: str, **where) -> dict:
    return {"stage": stage, "unit": unit, "id": id_, "reason": reason, "seed_id": where.get("seed_id"),
            "prefix_kind": where.get("prefix_kind"), "dimension": where.get("dimension"), "side": where.get("side")}


def _why(row: dict, field: str = "reason") -> str:
    return f"{row['status']}: {row.get(field) or 'no detail'}"


def _tally(cast: list[dict]) -> str:
    return f"majority reject ({sum(r.get('verdict') == 'accept' for r in cast)} of {len(cast)} votes accept)"


def upstream(tags: list[dict], prefixes: list[dict], relevance: list[dict], variations: list[dict],
             variation_votes: dict[str, list[dict]], classified: list[dict], pairs: list[dict],
             pair_votes: dict[str, list[dict]], panel: int) -> list[dict]:
    """Rejections from tagging to pair review (the release filter adds its own in finalize)."""
    kinds = {p["prefix_id"]: p["prefix_kind"] for p in prefixes}
    out = [record("tagging", "seed", t["seed_id"], _why(t), seed_id=t["seed_id"]) for t in tags if t["status"] != "ok"]
    out += [record("relevance", "prefix", r["prefix_id"], _why(r, "error"), seed_id=r["seed_id"],
                   prefix_kind=kinds.get(r["prefix_id"]), dimension="original")
            for r in relevance if r["status"] != "ok"]
    for v in variations:
        where = {"seed_id": v["seed_id"], "prefix_kind": v["prefix_kind"], "dimension": v["dimension"]}
        if v["status"] == "rejected":
            out.append(record("variation_check", "variation", v["variation_id"], v["reason"], **where))
        elif v["status"] != "ok":
            out.append(record("generation", "variation", v["variation_id"], _why(v), **where))
        else:
            cast = variation_votes.get(v["variation_id"], [])
            if not majority_accept([vote(r, VARIATION_CRITERIA) for r in cast], panel):
                out.append(record("review", "variation", v["variation_id"], _tally(cast), **where))
    for c in classified:
        where = {"seed_id": c["seed_id"], "prefix_kind": c["prefix_kind"], "dimension": c["dimension"], "side": "source"}
        if c["status"] != "ok":
            out.append(record("classification", "item", c["item_key"], _why(c), **where))
        elif not c.get("pairable"):  # what generate-pairs filtered on
            out.append(record("pairability", "item", c["item_key"], f"edit grade {c.get('pair_edit_grade')}", **where))
    for p in pairs:
        where = {"seed_id": p["seed_id"], "prefix_kind": p["prefix_kind"], "dimension": p["dimension"],
                 "side": "counterpart"}
        if p["status"] == "rejected":
            out.append(record("pair_check", "pair candidate", p["pair_candidate_id"], p["reason"], **where))
        elif p["status"] != "ok":
            out.append(record("pair_generation", "pair candidate", p["pair_candidate_id"], _why(p), **where))
        else:
            cast = pair_votes.get(p["pair_candidate_id"], [])
            if not majority_accept([vote(r, PAIR_CRITERIA) for r in cast], panel):
                out.append(record("pair_review", "pair candidate", p["pair_candidate_id"], _tally(cast), **where))
    return out
