"""Judge-panel reliability (paper §6, Appendix F) and the stage that writes every reliability table.

Judge panel: every evaluated model's panel votes (`<axis>_votes`), rollouts that are `ok` only; a
unit is one (model, item). Per axis and overall: P_o, Krippendorff's alpha, Fleiss' kappa
(`agreement.py`), and unanimous / majority / unresolved shares describing how the majority rule
resolved the units. Human validation (Tables 3, 20-23, only with `paths.human_labels`) is in
`human_validation.py`.
"""
from __future__ import annotations

from collections import Counter

import pandas as pd

from aura.io import atomic_write_text, read_jsonl
from aura.pipeline.context import StageContext
from aura.provenance import provenance, write_provenance
from aura.stats.agreement import agreement_row, pooled

from ..evaluate.schemas import LABELS
from ..settings import role_models
from .human_validation import (ensemble_sensitivity, human_validation, judge_accuracy, read_human_labels,
                               validation_panel)


# --- judge panel --------------------------------------------------------------------------------
def panel_ratings(panel: list[dict], axis: str) -> tuple[pd.DataFrame, Counter]:
    """Judge ratings of one axis (ok rollouts only) and how the majority rule resolved the units."""
    rows, outcome = [], Counter()
    for r in panel:
        votes = r.get(f"{axis}_votes") or {}
        if r["rollout_status"] != "ok" or not votes:
            continue
        unit = f"{r['model']}|{r['item_id']}"
        given = [v for v in votes.values() if v is not None]
        rows += [{"unit": unit, "rater": j, "label": v} for j, v in votes.items() if v is not None]
        outcome["unresolved" if r[axis] == "unresolved" else
                "unanimous" if len(given) == len(votes) and len(set(given)) == 1 else "majority"] += 1
    return pd.DataFrame(rows, columns=["unit", "rater", "label"]), outcome


def judge_reliability(panel: list[dict]) -> pd.DataFrame:
    out, per_axis = [], {}
    for axis in LABELS:
        ratings, outcome = panel_ratings(panel, axis)
        per_axis[axis] = ratings
        n = sum(outcome.values())
        out.append({"axis": axis, **agreement_row(ratings), "panel_units": n,
                    **{f"{k}_share": (outcome[k] / n if n else float("nan")) for k in ("unanimous", "majority", "unresolved")},
                    **{k: outcome[k] for k in ("unanimous", "majority", "unresolved")}})
    overall = pooled(per_axis)
    n = sum(r["panel_units"] for r in out)
    out.append({"axis": "overall", **agreement_row(overall), "panel_units": n,
                **{f"{k}_share": (sum(r[k] for r in out) / n if n else float("nan"))
                   for k in ("unanimous", "majority", "unresolved")},
                **{k: sum(r[k] for r in out) for k in ("unanimous", "majority", "unresolved")}})
    return pd.DataFrame(out)


def run(ctx: StageContext) -> None:
    """Stage reliability: --in panel_<i>=... [--in human_labels=... --in validation_<i>=...]
    --out judge_reliability=... [--out table3=... --out judge_accuracy=... [--out ensembles=...]]
    (table3 and judge_accuracy need human labels; ensembles a validation panel too)."""
    panel = [r for name, p in ctx.inputs.items() if name.startswith("panel") for r in read_jsonl(p)]
    tables = {"judge_reliability": judge_reliability(panel)}
    if "human_labels" in ctx.inputs:
        human = read_human_labels(ctx.inputs["human_labels"])
        scoring = role_models(ctx.config, "judges")
        validation = [j for name, p in ctx.inputs.items() if name.startswith("validation") for j in read_jsonl(p)]
        if ctx.config.raw["aura"]["roles"].get("validation_judges"):  # the validation panel voted on the human-labelled items
            votes, judges = validation_panel(validation), list(dict.fromkeys(role_models(ctx.config, "validation_judges")))
        else:
            votes, judges = panel, scoring
        if "ensembles" in ctx.outputs:
            tables["ensembles"] = ensemble_sensitivity(human, votes, judges, scoring)
        tables["table3"] = human_validation(human, votes, judges)
        tables["judge_accuracy"] = judge_accuracy(human, votes, judges)
    for name, table in tables.items():
        out = ctx.outputs[name]
        write_provenance(out, provenance(ctx.stage, ctx.config, inputs=[str(p) for p in ctx.inputs.values()],
                                         extra={"rows": len(table)}))
        atomic_write_text(out, table.to_csv(index=False))
