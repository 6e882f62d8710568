"""Is the verdict calibrated? Faithful and shifted reruns drawn from a family's reference data, judged by the
verdict's own code (``aura.stats.verdict.compare``).

A *faithful* rerun draws every reported number again from the truth the paper reports, and the paper's own
number is a draw too (it had sampling error as well): a rate k/n is Binomial(n, p) on both sides (n: the paper's
where stated, else the design's: ``design_n(row)``, the family's own, e.g. the dataset's 1,249 rows), a count of
n the same as a rate, an "Avg." a mean of such drawn parts (the reference folder's ``checks.yaml`` names them; its n
the parts' summed), r a normal draw on Fisher's z, a fact of the data (kind ``exact``) the same number. A bound is
drawn at the bound itself (the hardest faithful truth). A row that has no n and no ``design_n`` has no sampling model
and is left out (``simulated`` says which rows were). ``run_share`` draws the rerun at a share of the paper's n (a
pilot; ``bench/pilot_verdicts.py``).

``simulate`` returns one row per draw with the count of each outcome. A *shifted* rerun moves the truth of the rerun
(not the paper) by ``shift`` (a fraction: 0.15 = 15 points; away from the nearer edge) on every rate, count of n and
mean, and a bound's beyond the bound (r and the facts of the data are not shifted: their power is not measured);
``power`` is per row the share of draws "not reproduced" when that row alone is shifted, approximated by the first
step of Holm's procedure (the row's raw p-value below alpha / tested rows): what a single 15-point deviation
among faithful rows is found with.

Draws of different rows are independent here; in a real run some share cases (Table 3 and Table 4 count the same
cases). Holm's procedure holds its family-wise level under any dependence, so this is a check of the rule, not of
the dependence.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np
import pandas as pd

from .reference import SCALE, Margins
from .reproduction import UNMAPPED, load_folder
from .verdict import (NOT_REPRODUCED, OUTCOMES, REPRODUCED, Estimate, compare, exact_estimate, mean_estimate,
                      pearson_estimate, wilson_estimate)


@dataclass
class Family:
    """A family's reference rows (with ``kind``), margins, and the parts of each average row."""
    ref: pd.DataFrame
    margins: Margins
    parts: dict[int, list[int]]  # an average row's index -> its parts' indexes


def load_family(folder, rows=None) -> Family:
    """A reference folder ready for simulation; ``rows`` (a boolean mask or index list) keeps only those rows (e.g.
    the rows a family maps to its run), with their averages' parts."""
    return Family(*load_folder(folder, rows))


def _truth(r) -> float | None:
    """A row's truth as a proportion (rates, counts of n) or r; None without a sampling model."""
    if r["unit"] in SCALE:
        return r["value"] / SCALE[r["unit"]]
    if r["unit"] == "count" and not pd.isna(r["n"]):
        return r["value"] / int(r["n"])
    if r["unit"] == "r":
        return r["value"]
    return None


def _shifted(p: float, shift: float, up: bool | None = None) -> float:
    """p moved by ``shift``: up or down as ``up`` says, else away from the nearer edge; clipped to [0, 1]."""
    if up is None:
        up = p + shift <= 1 and (p < 0.5 or p - shift < 0)
    return min(max(p + shift if up else p - shift, 0.0), 1.0)


def _n(r, design_n) -> int | None:
    if not pd.isna(r["n"]):
        return int(r["n"])
    return design_n(r) if design_n else None


def mapped(ref: pd.DataFrame, lookup) -> pd.Series:
    """Per reference row: whether the family maps it to its run, asked of ``lookup`` over a run that produced
    nothing: every row but those whose reason starts with ``reproduction.UNMAPPED``."""
    return pd.Series([not (isinstance(x := lookup(r), str) and x.startswith(UNMAPPED)) for _, r in ref.iterrows()],
                     index=ref.index)


def simulated(fam: Family, design_n=None) -> pd.Series:
    """Per row: whether it has a sampling model here (an n, stated or by design, a bound with n, or ``exact``)."""
    ok = []
    for i, r in fam.ref.iterrows():
        if r["kind"] == "exact":
            ok.append(True)
        elif i in fam.parts:
            ok.append(True)
        else:
            ok.append(_n(r, design_n) is not None and _truth(r) is not None)
    return pd.Series(ok, index=fam.ref.index)


def draw(fam: Family, rng: np.random.Generator, shift: float = 0.0, shifted_rows=None,
         design_n=None, run_share: float = 1.0) -> tuple[pd.DataFrame, dict[int, Estimate]]:
    """One rerun: the reference frame with the paper's numbers redrawn, and the rerun's estimates by row index
    (rows without a sampling model are left out of both). ``shift`` moves the rerun's truth of ``shifted_rows``
    (default: every rate, count of n and mean); ``run_share`` is the rerun's n as a share of the paper's (a pilot
    that runs a stratified subsample: each cell's n scaled)."""
    keep = simulated(fam, design_n)
    ref = fam.ref[keep].copy()
    shifted_rows = set(ref.index if shifted_rows is None else shifted_rows)
    est, paper_k = {}, {}
    # an average's parts move together, the way the average moves (away from its nearer edge): a shift of every
    # part in its own direction would cancel in the mean
    up = {j: _truth(fam.ref.loc[i]) < 0.5 for i, parts in fam.parts.items() for j in parts}

    def run_n(n: int) -> int:
        return max(4, round(n * run_share))

    def binomial_pair(i, r):
        n, p = _n(r, design_n), min(max(_truth(r), 0.0), 1.0)
        q = _shifted(p, shift, up.get(i)) if i in shifted_rows or (shift and i in up) else p
        k_paper, k_run = int(rng.binomial(n, p)), int(rng.binomial(run_n(n), q))
        paper_k[i] = (k_paper, n)
        return k_paper, k_run, n

    for i, r in ref.iterrows():
        if r["kind"] == "exact":
            est[i] = exact_estimate(r["value"], r)
        elif i in fam.parts:
            continue  # after its parts
        elif r["unit"] == "r":
            n = _n(r, design_n)
            z = math.atanh(min(max(r["value"], -0.999), 0.999))
            ref.at[i, "value"] = math.tanh(rng.normal(z, 1 / math.sqrt(n - 3)))
            est[i] = pearson_estimate(math.tanh(rng.normal(z, 1 / math.sqrt(run_n(n) - 3))), run_n(n))
        elif r["kind"] == "bound":  # at the bound; shifted: beyond it, on the side the bound rules out
            n, b = _n(r, design_n), _truth(r)
            if i in shifted_rows:
                b = min(max(b + (shift if r["bound"] == "upper" else -shift), 0.0), 1.0)
            est[i] = wilson_estimate(int(rng.binomial(run_n(n), b)), run_n(n))
        else:
            k_paper, k_run, n = binomial_pair(i, r)
            if r["unit"] == "count":
                ref.at[i, "value"] = float(k_paper)
                est[i] = exact_estimate(k_run, r, run_n(n))
            else:
                ref.at[i, "value"] = SCALE[r["unit"]] * k_paper / n
                est[i] = wilson_estimate(k_run, run_n(n))
    for i, parts in fam.parts.items():
        if i not in ref.index:
            continue
        for j in parts:
            if j not in paper_k:
                binomial_pair(j, fam.ref.loc[j])
        scale = SCALE[ref.at[i, "unit"]]
        ref.at[i, "value"] = scale * float(np.mean([paper_k[j][0] / paper_k[j][1] for j in parts]))
        runs = [est[j] for j in parts if j in est]
        est[i] = mean_estimate([e.k / e.n for e in runs], [e.n for e in runs])
    ref["n"] = [_n(r, design_n) if r["kind"] != "exact" else r["n"] for _, r in ref.iterrows()]
    ref["n"] = ref["n"].astype("Int64")
    return ref, est


def judge(fam: Family, ref: pd.DataFrame, est: dict[int, Estimate]) -> pd.DataFrame:
    """The verdict rows of one drawn rerun."""
    return compare(ref, lambda row: est[row.name], fam.margins)


def simulate(fam: Family, draws: int, seed: int = 0, shift: float = 0.0, design_n=None) -> pd.DataFrame:
    """One row per draw: the count of each outcome (columns ``OUTCOMES``), shift applied to every row."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(draws):
        v = judge(fam, *draw(fam, rng, shift=shift, design_n=design_n))
        out.append({o: int((v["verdict"] == o).sum()) for o in OUTCOMES})
    return pd.DataFrame(out, columns=list(OUTCOMES))


def outcome_shares(fam: Family, draws: int, seed: int = 0, shift: float = 0.0, design_n=None,
                   run_share: float = 1.0) -> pd.DataFrame:
    """Per simulated row: the share of draws with each outcome (columns ``OUTCOMES``), every row's truth shifted by
    ``shift``, the rerun's n ``run_share`` of the paper's: what a planted pilot's verdict reads."""
    rng = np.random.default_rng(seed)
    tally = None
    for _ in range(draws):
        v = judge(fam, *draw(fam, rng, shift=shift, design_n=design_n, run_share=run_share))
        got = pd.get_dummies(v["verdict"]).reindex(columns=list(OUTCOMES), fill_value=0).astype(int)
        tally = got if tally is None else tally + got
    return pd.concat([v[["table", "row", "column", "kind"]], tally / draws], axis=1)


def row_rates(fam: Family, draws: int, seed: int = 0, shift: float = 0.15, design_n=None) -> pd.DataFrame:
    """Per simulated row: the share of faithful draws it is reproduced, and its power against ``shift`` alone
    (its raw p-value below alpha / tested rows: Holm's first step)."""
    rng = np.random.default_rng(seed)
    reproduced, found, tested = None, None, None
    for _ in range(draws):
        ref, est = draw(fam, rng, design_n=design_n)
        v = judge(fam, ref, est)
        reproduced = (v["verdict"] == REPRODUCED).astype(int) + (0 if reproduced is None else reproduced)
        ref_s, est_s = draw(fam, rng, shift=shift, design_n=design_n)
        s = judge(fam, ref_s, est_s)
        m = max(int(s["p_value"].notna().sum()), 1)
        hit = ((s["p_value"] < fam.margins.alpha / m) | (s["verdict"] == NOT_REPRODUCED)).astype(int)
        found = hit + (0 if found is None else found)
        tested = s["p_value"].notna() if tested is None else tested
    rows = v[["table", "row", "column", "kind"]].copy()
    rows["reproduced_if_faithful"] = reproduced / draws
    rows["power"] = (found / draws).where(tested & ~rows["kind"].isin(["correlation", "exact"]))
    return rows


def decision_n(unit_variance: float, se_paper: float, margin: float, alpha: float = 0.05,
               power: float = 0.8) -> int | None:
    """The run's n at which a faithful rerun is *reproduced* with probability ``power``: the difference d is
    about normal with se_d^2 = se_paper^2 + unit_variance / n, and its 90% interval lies inside +-margin when
    |d| <= margin - z_(1-alpha) se_d, which holds with probability ``power`` when se_d <= margin / (z_(1-alpha) +
    z_((1+power)/2)). None when the paper's own error alone is too wide for that."""
    z = NormalDist().inv_cdf
    room = (margin / (z(1 - alpha) + z((1 + power) / 2))) ** 2 - se_paper ** 2
    return math.ceil(unit_variance / room) if room > 0 else None
