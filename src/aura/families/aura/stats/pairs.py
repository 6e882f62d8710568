"""Matched-pair robustness check (paper Appendix I.1, Table 32).

A pair is a ``pair_id`` with exactly one NSP row and one SP row for the model (anything else is counted as
malformed). A pair is used when both sides carry a valid Action Safety label; otherwise it is counted as
excluded. Over the used pairs: NSP and SP unsafe rates, their difference, a source-seed-clustered bootstrap
interval (seeds drawn with replacement, every pair of a drawn seed taken; same draws and vectorised path as
``bootstrap.clustered_diff``, ``default_rng(42)`` fresh per model), and an exact McNemar test on the 2x2 of
(NSP unsafe?, SP unsafe?). A pair's seed is its NSP side's ``seed_id`` (both sides share it by construction).
"""
from __future__ import annotations

import numpy as np
import pandas as pd
from statsmodels.stats.contingency_tables import mcnemar

from .bootstrap import N_RESAMPLES, SEED, percentile_ci, resample_sums, safe_rate, sorted_seeds
from .metrics import SAFETY, check_columns


def pair_table(df_model: pd.DataFrame) -> pd.DataFrame:
    """One row per pair_id of one model: ``status`` (``valid`` / ``invalid_label`` / ``malformed``), seed,
    and for valid pairs ``nsp_unsafe`` / ``sp_unsafe`` as 0/1."""
    p = df_model[df_model["pair_id"].notna()]
    cols = ["pair_id", "seed_id", "status", "nsp_unsafe", "sp_unsafe"]
    if p.empty:
        return pd.DataFrame(columns=cols)
    counts = p.groupby(["pair_id", "pair_label"]).size().unstack(fill_value=0)
    nsp_c = counts["NSP"] if "NSP" in counts else pd.Series(0, index=counts.index)
    sp_c = counts["SP"] if "SP" in counts else pd.Series(0, index=counts.index)
    well_formed = (nsp_c == 1) & (sp_c == 1) & (counts.sum(axis=1) == 2)
    ids = counts.index[well_formed]
    nsp = p[p["pair_label"] == "NSP"].set_index("pair_id").reindex(ids)
    sp = p[p["pair_label"] == "SP"].set_index("pair_id").reindex(ids)
    valid = nsp["safety"].isin(SAFETY) & sp["safety"].isin(SAFETY)
    good = pd.DataFrame({"pair_id": ids, "seed_id": nsp["seed_id"].to_numpy(),
                         "status": np.where(valid, "valid", "invalid_label"),
                         "nsp_unsafe": np.where(valid, (nsp["safety"] == "Unsafe").astype(int), -1),
                         "sp_unsafe": np.where(valid, (sp["safety"] == "Unsafe").astype(int), -1)})
    bad_ids = counts.index[~well_formed]
    first_seed = p.groupby("pair_id")["seed_id"].first()
    bad = pd.DataFrame({"pair_id": bad_ids, "seed_id": first_seed.reindex(bad_ids).to_numpy(),
                        "status": "malformed", "nsp_unsafe": -1, "sp_unsafe": -1})
    return pd.concat([good, bad], ignore_index=True)[cols]


def _mcnemar(a: int, b: int, c: int, d: int) -> float:
    if a + b + c + d == 0:
        return float("nan")
    return float(mcnemar(np.array([[a, b], [c, d]]), exact=True).pvalue)


def matched_pairs_model(df_model: pd.DataFrame, n_resamples: int = N_RESAMPLES, seed: int = SEED) -> dict:
    pt = pair_table(df_model)
    used = pt[pt["status"] == "valid"]
    nsp_u, sp_u = used["nsp_unsafe"].to_numpy(int), used["sp_unsafe"].to_numpy(int)
    n = len(used)
    a = int((nsp_u & sp_u).sum())
    b = int((nsp_u & (1 - sp_u)).sum())
    c = int(((1 - nsp_u) & sp_u).sum())
    d = n - a - b - c
    out = {"rows": len(df_model), "rows_paired": int(df_model["pair_id"].notna().sum()),
           "pairs_total": len(pt), "pairs_malformed": int((pt["status"] == "malformed").sum()),
           "pairs_excluded": int((pt["status"] == "invalid_label").sum()), "n_pairs": n,
           "nsp_unsafe": int(nsp_u.sum()), "sp_unsafe": int(sp_u.sum()),
           "nsp_rate": float(safe_rate(nsp_u.sum(), n)), "sp_rate": float(safe_rate(sp_u.sum(), n))}
    out["diff"] = out["nsp_rate"] - out["sp_rate"]
    seeds = sorted_seeds(used["seed_id"])
    out["n_seeds"] = len(seeds)
    if seeds:
        sums = (used.groupby("seed_id", sort=False)[["nsp_unsafe", "sp_unsafe"]].sum()
                .assign(n=used.groupby("seed_id", sort=False).size()).reindex(seeds).to_numpy(np.int64))
        res = resample_sums(sums, n_resamples, np.random.default_rng(seed))
        nsp, sp = safe_rate(res[:, 0], res[:, 2]), safe_rate(res[:, 1], res[:, 2])
    else:
        nsp = sp = np.full(0, np.nan)
    for name, samples in (("nsp", nsp), ("sp", sp), ("diff", nsp - sp)):
        out[f"{name}_ci_low"], out[f"{name}_ci_high"] = percentile_ci(samples)
        out[f"n_nan_{name}"] = int(np.isnan(samples).sum())
    out.update(both_unsafe=a, nsp_only_unsafe=b, sp_only_unsafe=c, both_safe=d, mcnemar_p=_mcnemar(a, b, c, d),
               n_resamples=n_resamples, seed=seed)
    return out


def matched_pairs(df: pd.DataFrame, n_resamples: int = N_RESAMPLES, seed: int = SEED) -> pd.DataFrame:
    """Table 32, one row per model: pair counts (``pairs_total`` = distinct pair ids among the model's rows,
    ``pairs_malformed``, ``pairs_excluded`` = a side lacks a valid safety label, ``n_pairs`` used), unsafe
    counts and rates (fractions) on each side, ``diff`` = NSP - SP, seed-clustered percentile intervals
    ``{nsp,sp,diff}_ci_{low,high}``, the McNemar 2x2 cells and its exact ``mcnemar_p``."""
    check_columns(df, ("model", "seed_id", "pair_label", "pair_id", "safety"))
    return pd.DataFrame([{"model": m, **matched_pairs_model(g, n_resamples, seed)}
                         for m, g in df.groupby("model", sort=False)])
