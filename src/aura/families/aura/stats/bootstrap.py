"""Source-seed-clustered bootstrap of the NSP - SP unsafe-rate difference (paper Appendix I.1, Table 31).

Variants derived from one source trajectory are not independent, so the resampling unit is the source seed:
for each model, the seeds represented among its rows with a valid Action Safety label are drawn with
replacement, every drawn seed contributes all of its rows, and the NSP and SP unsafe rates are recomputed with
their own denominators (summed numerators / summed denominators). 10,000 resamples, ``numpy.random.
default_rng(42)`` created afresh for each model, percentile 95% intervals (``np.nanpercentile``, linear).

Random draws. One call ``rng.integers(0, n_seeds, size=(n_resamples, n_seeds))`` gives the index matrix:
row b lists the seed positions drawn in resample b, positions referring to the seeds in sorted order
(``sorted_seeds``). Row b equals what the b-th of n_resamples successive ``rng.integers(0, n_seeds,
size=n_seeds)`` calls returns, which is how ``clustered_diff_reference`` draws, so the two agree exactly.
The vectorised path turns the matrix into per-resample seed multiplicities (one ``np.bincount``) and
multiplies them by the per-seed sums (one matrix product); there is no Python loop over resamples.

A resample whose NSP (or SP) denominator is zero has an undefined rate: it is NaN, left out of the
percentiles, and counted (``n_nan_nsp``, ``n_nan_sp``, ``n_nan_diff``). Rates are fractions, not percent.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from aura.stats.bootstrap import (ALPHA, draw_indices, percentile_ci, resample_sums, safe_rate,  # noqa: F401
                                  sorted_seeds)

from .metrics import SAFETY, check_columns

N_RESAMPLES = 10_000
SEED = 42
SUM_COLUMNS = ("nsp_unsafe", "nsp_n", "sp_unsafe", "sp_n")


def _one_model(df_model: pd.DataFrame) -> pd.DataFrame:
    check_columns(df_model, ("seed_id", "pair_label", "safety"))
    if "model" in df_model.columns and df_model["model"].nunique() > 1:
        raise ValueError("clustered_diff expects the rows of one model; use table31 for several")
    return df_model


def seed_sums(df_model: pd.DataFrame) -> tuple[list, np.ndarray]:
    """Seeds (sorted) among rows with a valid safety label, and per seed: NSP unsafe, NSP n, SP unsafe, SP n."""
    rows = df_model[df_model["safety"].isin(SAFETY)]
    seeds = sorted_seeds(rows["seed_id"])
    unsafe = (rows["safety"] == "Unsafe").astype(int)
    parts = pd.DataFrame({"seed_id": rows["seed_id"],
                          "nsp_unsafe": unsafe * (rows["pair_label"] == "NSP"),
                          "nsp_n": (rows["pair_label"] == "NSP").astype(int),
                          "sp_unsafe": unsafe * (rows["pair_label"] == "SP"),
                          "sp_n": (rows["pair_label"] == "SP").astype(int)})
    sums = parts.groupby("seed_id", sort=False)[list(SUM_COLUMNS)].sum().reindex(seeds)
    return seeds, sums.to_numpy(dtype=np.int64).reshape(len(seeds), len(SUM_COLUMNS))


def _summary(df_model: pd.DataFrame, n_seeds: int, totals: np.ndarray, nsp: np.ndarray, sp: np.ndarray,
             n_resamples: int, seed: int, return_samples: bool) -> dict:
    valid = df_model["safety"].isin(SAFETY)
    labelled = df_model["pair_label"].isin(("NSP", "SP"))
    nsp_k, nsp_n, sp_k, sp_n = (int(x) for x in totals)
    diff = nsp - sp
    out = {"n_rows": len(df_model), "n_valid": int(valid.sum()), "n_excluded": int((~valid).sum()),
           "n_other_label": int((valid & ~labelled).sum()), "n_seeds": n_seeds,
           "n_resamples": n_resamples, "seed": seed,
           "nsp_unsafe": nsp_k, "nsp_n": nsp_n, "nsp_rate": float(safe_rate(nsp_k, nsp_n)),
           "sp_unsafe": sp_k, "sp_n": sp_n, "sp_rate": float(safe_rate(sp_k, sp_n))}
    out["diff"] = out["nsp_rate"] - out["sp_rate"]
    for name, samples in (("nsp", nsp), ("sp", sp), ("diff", diff)):
        out[f"{name}_ci_low"], out[f"{name}_ci_high"] = percentile_ci(samples)
        out[f"n_nan_{name}"] = int(np.isnan(samples).sum())
    if return_samples:
        out["samples"] = {"nsp": nsp, "sp": sp, "diff": diff}
    return out


def clustered_diff(df_model: pd.DataFrame, n_resamples: int = N_RESAMPLES, seed: int = SEED,
                   return_samples: bool = False) -> dict:
    """Seed-clustered bootstrap for one model's rows (vectorised).

    Returns counts (``n_rows``, ``n_valid``, ``n_excluded`` = rows without a valid safety label,
    ``n_other_label`` = valid rows that are neither NSP nor SP, ``n_seeds``), point estimates on the full data
    (``nsp_rate``, ``sp_rate``, ``diff`` = NSP - SP, with their numerators and denominators), percentile
    intervals ``{nsp,sp,diff}_ci_{low,high}``, and ``n_nan_{nsp,sp,diff}`` resamples left out for a zero
    denominator. ``return_samples`` adds the resampled arrays under ``samples``. A model with no valid
    safety label gets NaN rates and intervals with n = 0 (no draws are made)."""
    df_model = _one_model(df_model)
    seeds, sums = seed_sums(df_model)
    rng = np.random.default_rng(seed)
    if len(seeds) == 0:
        empty = np.full(0, np.nan)
        return _summary(df_model, 0, np.zeros(4, dtype=np.int64), empty, empty, n_resamples, seed, return_samples)
    res = resample_sums(sums, n_resamples, rng)
    nsp, sp = safe_rate(res[:, 0], res[:, 1]), safe_rate(res[:, 2], res[:, 3])
    return _summary(df_model, len(seeds), sums.sum(axis=0), nsp, sp, n_resamples, seed, return_samples)


def clustered_diff_reference(df_model: pd.DataFrame, n_resamples: int = N_RESAMPLES, seed: int = SEED,
                             return_samples: bool = False) -> dict:
    """The same bootstrap written directly and slowly, to check ``clustered_diff``: for each resample, draw
    seed positions (same generator, same draws, same order), concatenate the drawn seeds' rows with pandas,
    and recompute the NSP and SP unsafe rates from the rows."""
    df_model = _one_model(df_model)
    rows = df_model[df_model["safety"].isin(SAFETY)]
    seeds = sorted_seeds(rows["seed_id"])
    groups = {s: g for s, g in rows.groupby("seed_id", sort=False)}
    rng = np.random.default_rng(seed)

    def rates(sample: pd.DataFrame) -> tuple[float, float]:
        out = []
        for label in ("NSP", "SP"):
            part = sample[sample["pair_label"] == label]
            out.append(float((part["safety"] == "Unsafe").sum() / len(part)) if len(part) else float("nan"))
        return out[0], out[1]

    nsp, sp = np.full(n_resamples if seeds else 0, np.nan), np.full(n_resamples if seeds else 0, np.nan)
    if seeds:
        for b in range(n_resamples):
            drawn = rng.integers(0, len(seeds), size=len(seeds))
            sample = pd.concat([groups[seeds[i]] for i in drawn], ignore_index=True)
            nsp[b], sp[b] = rates(sample)
    totals = np.array([int(((rows["pair_label"] == "NSP") & (rows["safety"] == "Unsafe")).sum()),
                       int((rows["pair_label"] == "NSP").sum()),
                       int(((rows["pair_label"] == "SP") & (rows["safety"] == "Unsafe")).sum()),
                       int((rows["pair_label"] == "SP").sum())])
    return _summary(df_model, len(seeds), totals, nsp, sp, n_resamples, seed, return_samples)


def table31(df: pd.DataFrame, n_resamples: int = N_RESAMPLES, seed: int = SEED) -> pd.DataFrame:
    """Table 31: ``clustered_diff`` per model (first-appearance order), each with a fresh
    ``default_rng(seed)``, so a model's interval does not depend on which other models are in the table."""
    check_columns(df, ("model", "seed_id", "pair_label", "safety"))
    return pd.DataFrame([{"model": m, **clustered_diff(g, n_resamples=n_resamples, seed=seed)}
                         for m, g in df.groupby("model", sort=False)])
