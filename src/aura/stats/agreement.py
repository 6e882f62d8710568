"""Agreement statistics over long-format ratings (unit, rater, label) of one axis.

- observed agreement P_o: per unit, the share of agreeing pairs among the raters who labelled it,
  averaged over units with at least two ratings;
- Krippendorff's alpha, nominal (`krippendorff.alpha`), raters x units with missing ratings allowed;
- Fleiss' kappa (`statsmodels`), over the units with the most common number of ratings.
`pooled` joins several axes (labels stay distinct categories per axis) for the overall rows.
"""
from __future__ import annotations

from itertools import combinations

import krippendorff
import numpy as np
import pandas as pd
from statsmodels.stats.inter_rater import fleiss_kappa


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
    """Fleiss' kappa and the units it covers: the units with the most common number of ratings
    (Fleiss needs the same count per unit, not the same raters: a pool of annotators works)."""
    if ratings.empty:
        return float("nan"), 0
    counts = pd.crosstab(ratings["unit"], ratings["label"])
    per_unit = counts.sum(axis=1)
    n = int(per_unit.mode().max())
    table = counts[per_unit == n]
    if n < 2 or table.shape[1] < 2:
        return float("nan"), len(table)
    return float(fleiss_kappa(table.to_numpy(), method="fleiss")), len(table)


def agreement_row(ratings: pd.DataFrame) -> dict:
    kappa, n_complete = fleiss(ratings)
    return {"units": int(ratings["unit"].nunique()), "raters": int(ratings["rater"].nunique()),
            "ratings": len(ratings), "P_o": observed_agreement(ratings), "alpha": alpha(ratings),
            "fleiss_kappa": kappa, "fleiss_units": n_complete}


def pooled(per_axis: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """All axes together: a unit is (axis, unit) and a label is (axis, label)."""
    parts = [r.assign(unit=axis + "|" + r["unit"], label=axis + "|" + r["label"]) for axis, r in per_axis.items()]
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=["unit", "rater", "label"])
