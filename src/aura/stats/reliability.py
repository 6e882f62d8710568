"""Label reliability (paper §6, Appendix F): judge-panel agreement and human validation (Table 3).

Ratings are long-format rows (unit, rater, label) per axis, where a unit is one (model, item):
- observed agreement P_o: per unit, the share of agreeing pairs among the raters who labelled it,
  averaged over units with at least two ratings;
- Krippendorff's alpha, nominal (`krippendorff.alpha`), raters x units with missing ratings allowed;
- Fleiss' kappa (`statsmodels`), over the units every rater labelled.
`overall` pools the three axes (labels stay distinct categories per axis).

Judge panel: every evaluated model's panel votes (`<axis>_votes`), rollouts that are `ok` only;
unanimous / majority / unresolved shares describe how the majority rule resolved them.

Human validation (Table 3, only with `paths.human_labels`): a CSV of model, item_id, axis,
annotator, label. The human reference is the annotators' strict majority; the judge label is the
panel's plurality (a unique most common vote). N_p counts units with both; Acc. is their agreement
with a Wilson 95% CI; Unan. is agreement on the N_p units where every judge gave the same label.
"""
from __future__ import annotations

from collections import Counter
from itertools import combinations
from pathlib import Path

import krippendorff
import numpy as np
import pandas as pd
from statsmodels.stats.inter_rater import aggregate_raters, fleiss_kappa
from statsmodels.stats.proportion import proportion_confint

from ..evaluate.schemas import ACTION_TYPE, DETECTION, SAFETY
from ..io import atomic_write_text, read_jsonl
from ..pipeline.context import StageContext
from ..provenance import provenance, write_provenance

LABELS = {"detection": DETECTION, "action_type": ACTION_TYPE, "safety": SAFETY}
HUMAN_COLUMNS = ("model", "item_id", "axis", "annotator", "label")


def _by_unit(ratings: pd.DataFrame) -> dict:
    """unit -> list of labels (one per rater who gave one)."""
    return {unit: list(g["label"]) for unit, g in ratings.groupby("unit", sort=True)}


def observed_agreement(ratings: pd.DataFrame) -> float:
    shares = []
    for labels in _by_unit(ratings).values():
        if len(labels) >= 2:
            pairs = list(combinations(labels, 2))
            shares.append(sum(a == b for a, b in pairs) / len(pairs))
    return float(np.mean(shares)) if shares else float("nan")


def alpha(ratings: pd.DataFrame) -> float:
    """Krippendorff's alpha (nominal); NaN when fewer than two raters or one category only."""
    if ratings.empty or ratings["rater"].nunique() < 2 or ratings["label"].nunique() < 2:
        return float("nan")
    codes = {lab: i for i, lab in enumerate(sorted(ratings["label"].unique()))}
    wide = ratings.pivot(index="rater", columns="unit", values="label")
    data = wide.apply(lambda col: col.map(codes)).to_numpy(dtype=float)
    return float(krippendorff.alpha(reliability_data=data, level_of_measurement="nominal"))


def fleiss(ratings: pd.DataFrame) -> tuple[float, int]:
    """Fleiss' kappa over the units rated by every rater, and how many units that is."""
    raters = ratings["rater"].nunique()
    if raters < 2:
        return float("nan"), 0
    wide = ratings.pivot(index="unit", columns="rater", values="label").dropna()
    if wide.empty or pd.unique(wide.to_numpy().ravel()).size < 2:
        return float("nan"), len(wide)
    codes = {lab: i for i, lab in enumerate(sorted(pd.unique(wide.to_numpy().ravel())))}
    table, _ = aggregate_raters(wide.apply(lambda col: col.map(codes)).to_numpy(dtype=int))
    return float(fleiss_kappa(table, method="fleiss")), len(wide)


def agreement_row(ratings: pd.DataFrame) -> dict:
    kappa, n_complete = fleiss(ratings)
    return {"units": int(ratings["unit"].nunique()), "raters": int(ratings["rater"].nunique()),
            "ratings": len(ratings), "P_o": observed_agreement(ratings), "alpha": alpha(ratings),
            "fleiss_kappa": kappa, "fleiss_units": n_complete}


def _pooled(per_axis: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """All axes together: a unit is (axis, unit) and a label is (axis, label)."""
    parts = [r.assign(unit=axis + "|" + r["unit"], label=axis + "|" + r["label"]) for axis, r in per_axis.items()]
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=["unit", "rater", "label"])


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
    pooled = _pooled(per_axis)
    n = sum(r["panel_units"] for r in out)
    out.append({"axis": "overall", **agreement_row(pooled), "panel_units": n,
                **{f"{k}_share": (sum(r[k] for r in out) / n if n else float("nan"))
                   for k in ("unanimous", "majority", "unresolved")},
                **{k: sum(r[k] for r in out) for k in ("unanimous", "majority", "unresolved")}})
    return pd.DataFrame(out)


# --- human validation ---------------------------------------------------------------------------
def read_human_labels(path: Path) -> pd.DataFrame:
    """The human-label CSV, checked: a clear error names the file and the offending row."""
    df = pd.read_csv(path, dtype=str, keep_default_na=False)
    missing = [c for c in HUMAN_COLUMNS if c not in df.columns]
    if missing:
        raise ValueError(f"{path}: missing column(s) {missing}; expected {list(HUMAN_COLUMNS)}")
    for i, r in df.iterrows():
        where = f"{path}: row {i + 2} (item_id {r['item_id']!r})"
        if r["axis"] not in LABELS:
            raise ValueError(f"{where}: unknown axis {r['axis']!r}; expected one of {list(LABELS)}")
        if r["label"] not in LABELS[r["axis"]]:
            raise ValueError(f"{where}: label {r['label']!r} is not a {r['axis']} label {LABELS[r['axis']]}")
    dup = df.duplicated(["model", "item_id", "axis", "annotator"])
    if dup.any():
        r = df[dup].iloc[0]
        raise ValueError(f"{path}: annotator {r['annotator']!r} labels item_id {r['item_id']!r} ({r['axis']}) twice")
    return df


def strict_majority(labels: list[str]) -> str | None:
    if not labels:
        return None
    label, n = Counter(labels).most_common(1)[0]
    return label if n > len(labels) / 2 else None


def plurality(labels: list[str]) -> str | None:
    counts = Counter(labels).most_common()
    if not counts or (len(counts) > 1 and counts[0][1] == counts[1][1]):
        return None
    return counts[0][0]


def _accuracy(hits: int, n: int) -> dict:
    lo, hi = proportion_confint(hits, n, alpha=0.05, method="wilson") if n else (float("nan"), float("nan"))
    return {"agree": hits, "acc": hits / n if n else float("nan"), "acc_ci_low": lo, "acc_ci_high": hi}


def human_validation(human: pd.DataFrame, panel: list[dict]) -> pd.DataFrame:
    """Table 3: per axis and overall, human reliability and judge-human agreement."""
    votes = {(r["model"], r["item_id"], axis): [v for v in (r.get(f"{axis}_votes") or {}).values() if v is not None]
             for r in panel if r["rollout_status"] == "ok" for axis in LABELS}
    out, per_axis, totals = [], {}, Counter()
    for axis in LABELS:
        part = human[human["axis"] == axis]
        ratings = pd.DataFrame({"unit": part["model"] + "|" + part["item_id"], "rater": part["annotator"],
                                "label": part["label"]})
        per_axis[axis] = ratings
        n_p = hits = n_u = hits_u = 0
        for (model, item), g in part.groupby(["model", "item_id"], sort=True):
            ref, judged = strict_majority(list(g["label"])), votes.get((model, item, axis), [])
            plural = plurality(judged)
            if ref is None or plural is None:
                continue
            n_p, hits = n_p + 1, hits + (plural == ref)
            if len(set(judged)) == 1:
                n_u, hits_u = n_u + 1, hits_u + (plural == ref)
        row = {"axis": axis, "N": int(ratings["unit"].nunique()), **agreement_row(ratings), "N_p": n_p,
               **_accuracy(hits, n_p), "N_unanimous": n_u, "agree_unanimous": hits_u,
               "acc_unanimous": hits_u / n_u if n_u else float("nan")}
        totals.update({"N_p": n_p, "hits": hits, "N_unanimous": n_u, "agree_unanimous": hits_u})
        out.append(row)
    pooled = _pooled(per_axis)
    out.append({"axis": "overall", "N": int(pooled["unit"].nunique()), **agreement_row(pooled), "N_p": totals["N_p"],
                **_accuracy(totals["hits"], totals["N_p"]), "N_unanimous": totals["N_unanimous"],
                "agree_unanimous": totals["agree_unanimous"],
                "acc_unanimous": (totals["agree_unanimous"] / totals["N_unanimous"]) if totals["N_unanimous"] else float("nan")})
    return pd.DataFrame(out)


def run(ctx: StageContext) -> None:
    """Stage reliability: --in panel_<i>=... [--in human_labels=...] --out judge_reliability=... [--out table3=...]"""
    panel = [r for name, p in ctx.inputs.items() if name.startswith("panel") for r in read_jsonl(p)]
    tables = {"judge_reliability": judge_reliability(panel)}
    if "human_labels" in ctx.inputs:
        tables["table3"] = human_validation(read_human_labels(ctx.inputs["human_labels"]), panel)
    for name, table in tables.items():
        out = ctx.outputs[name]
        write_provenance(out, provenance(ctx.stage, ctx.config, inputs=[str(p) for p in ctx.inputs.values()],
                                         extra={"rows": len(table)}))
        atomic_write_text(out, table.to_csv(index=False))
