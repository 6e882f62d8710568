"""Did it reproduce? One verdict per reported number: two estimates compared, not a point against an interval.

A faithful rerun differs from the paper by both studies' sampling error, so a verdict rests on the *difference*
(reproduced - reported) and an interval that carries both (Patil, Peng & Leek 2016: a replication is judged by a
prediction interval, not by the original's point inside the new interval). Four outcomes:

- **reproduced**: the difference's 90% interval lies inside +-margin: equivalent by two one-sided tests at 5%
  (TOST, Lakens 2017). Within the margin (``aura.stats.reference``: per kind of row, each with its reason) the two
  numbers are the same result, even where a large run tells them apart.
- **not reproduced**: the difference excludes 0 at the family's level ``alpha`` after a multiplicity control over
  every tested row of the family (Holm by default: a faithful rerun shows any false "not reproduced" in at most
  ``alpha`` of reruns; ``fdr_bh``: Benjamini-Hochberg), or a number that has no sampling error (a fact of the
  data, a deterministic count) differs by more than its margin and its printed rounding.
- **inconclusive**: neither; ``n_to_decide`` is how many items of the run would decide it if the difference
  stayed as observed (blank, with the reason, when no run size can: the paper's own sampling error is too wide).
- **not comparable**: nothing fair can be said; ``reason`` starts with one of ``REASONS`` ("subsample": a fact of the
  full data, such as its size, in a run that caps the data: a pilot).

How each pair is compared (every value in the reported unit; ``method`` says which):

- a proportion k/n beside a rate with the paper's n (stated, else assumed to be the run's: ``n_basis``):
  Newcombe's hybrid score interval of the difference of two independent proportions and the score test
  (statsmodels), with the paper's k = value x n. A count with an n on both sides (flipped cases of those safe on the
  original, detected samples of the failed ones) is compared the same way, as the rate k/n, in percent.
- any other estimate with a standard error (a clustered bootstrap: (hi - lo) / 3.92; a mean of rates; r): normal,
  the paper's standard error taken as the run's at the paper's n (the same design): se_p = se_e sqrt(n_e / n_p);
  r is tested on Fisher's z.
- an estimate without sampling error, or a row of kind ``exact``: |difference| <= margin + half the last printed
  digit.
- a bound ("below 10%"): a one-sided test of the estimate against the bound (not reproduced when it is beyond the
  bound, after the multiplicity control); reproduced when its one-sided 95% limit lies on the bound's side.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist
from typing import Callable

import numpy as np
import pandas as pd

from ..errors import UserError
from .intervals import wilson
from .reference import SCALE, Margins

REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE, NOT_COMPARABLE = "reproduced", "not reproduced", "inconclusive", \
    "not comparable"
OUTCOMES = (REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE, NOT_COMPARABLE)
REASONS = ("model unavailable", "excluded cases", "demo data", "not produced", "different models", "subsample")
VERDICT_COLUMNS = ["table", "row", "column", "model", "measures", "kind", "unit", "reported", "reported_n", "n_basis",
                   "reproduced", "lo", "hi", "n", "method", "difference", "diff_lo", "diff_hi", "margin", "p_value",
                   "p_adjusted", "verdict", "n_to_decide", "reason"]
NORMAL = NormalDist()  # the standard normal (stdlib: the end-of-run summary imports this module, not scipy)
Z95 = NORMAL.inv_cdf(0.975)
EDGE = 1e-9  # float slack on a margin's edge (a unit conversion's rounding error), in the reported unit


@dataclass(frozen=True)
class Estimate:
    """A reproduced number with its 95% interval and n, in ``unit``; ``k`` for a proportion k/n, ``se`` its
    standard error (0: no sampling error); ``reason`` makes it not comparable (one of ``REASONS``, optionally
    followed by ": detail")."""
    value: float
    lo: float
    hi: float
    n: int | None
    unit: str = "fraction"
    method: str = ""
    reason: str | None = None
    k: int | None = None
    se: float | None = None


def wilson_estimate(k: int, n: int, reason: str | None = None) -> Estimate:
    """k/n with its Wilson 95% interval (``aura.stats.intervals.wilson``)."""
    lo, hi = wilson(k, n)
    return Estimate(k / n if n else math.nan, lo, hi, n, "fraction", "wilson", reason, k=int(k))


def bootstrap_estimate(point: float, lo: float, hi: float, n: int | None, unit: str = "fraction",
                       reason: str | None = None) -> Estimate:
    """A point estimate with a (clustered) bootstrap's percentile interval lo..hi; its standard error is read off
    the interval's width."""
    return Estimate(point, lo, hi, n, unit, "bootstrap", reason, se=(hi - lo) / (2 * Z95))


def mean_estimate(rates, ns, reason: str | None = None) -> Estimate:
    """The mean of K rates over independent parts (a paper's "Avg." column) with its normal 95% interval:
    variance sum(p (1 - p) / n) / K^2, each p kept half a case from the edges as in ``binomial_se`` (a part at
    0/1 or 1/1 still has sampling error: without it an average of small all-or-nothing parts read as exact and
    any difference as "not reproduced", which a dress rehearsal showed); n is the parts' n summed."""
    p, n = np.asarray(rates, dtype=float), np.asarray(ns, dtype=float)
    keep = n > 0
    if not keep.any():
        return Estimate(math.nan, math.nan, math.nan, None, "fraction", "mean of rates", reason)
    p, n = p[keep], n[keep]
    edge = np.clip(p, 0.5 / n, 1 - 0.5 / n)
    mean, se = float(p.mean()), float(math.sqrt(float((edge * (1 - edge) / n).sum())) / len(p))
    return Estimate(mean, max(mean - Z95 * se, 0.0), min(mean + Z95 * se, 1.0), int(n.sum()), "fraction",
                    "mean of rates", reason, se=se)


def exact_estimate(value: float, row, n: int | None = None) -> Estimate:
    """A number the data give exactly (a count, a mean), in ``row``'s unit: no sampling error; its interval is
    the printed rounding."""
    half = 0.5 * 10.0 ** -int(row["decimals"])
    return Estimate(float(value), float(value) - half, float(value) + half, n, row["unit"], "exact", se=0.0)


def pearson_estimate(r: float, n: int) -> Estimate | None:
    """Pearson r over n points with its Fisher-z 95% interval (standard error by the delta method, for the
    difference's interval); None (not produced) below 4 points or no r."""
    if n is None or pd.isna(r) or int(n) < 4:
        return None
    z, se = math.atanh(max(min(float(r), 1 - 1e-12), -1 + 1e-12)), 1 / math.sqrt(int(n) - 3)
    return Estimate(float(r), math.tanh(z - Z95 * se), math.tanh(z + Z95 * se), int(n), "r", "fisher_z",
                    se=(1 - float(r) ** 2) * se)


def convert(x: float, unit: str, to: str) -> float:
    """x from one unit to another: percent <-> fraction; count and r only to themselves."""
    if unit == to:
        return x
    if unit in SCALE and to in SCALE:
        return x * SCALE[to] / SCALE[unit]
    raise UserError(f"cannot compare a {unit} with a {to}")


def _sf(x: float) -> float:
    """The standard normal's upper tail P(Z > x)."""
    return 1.0 - NORMAL.cdf(x) if x < 0 else NORMAL.cdf(-x)


def _check_reason(reason: str) -> str:
    if reason.split(":")[0].strip() not in REASONS:
        raise UserError(f"not-comparable reason {reason!r}: it must start with one of {', '.join(REASONS)}")
    return reason


def _newcombe(k1, n1, k2, n2, alpha):
    from statsmodels.stats.proportion import confint_proportions_2indep

    with np.errstate(divide="ignore", invalid="ignore"):  # statsmodels also computes a ratio, undefined at 0
        lo, hi = confint_proportions_2indep(k1, n1, k2, n2, method="newcomb", compare="diff", alpha=alpha)
    return float(lo), float(hi)


def _score_p(k1, n1, k2, n2) -> float:
    """Two-sided score test of p1 = p2; 1 where both proportions sit on the same edge (0/n, n/n)."""
    from statsmodels.stats.proportion import test_proportions_2indep

    if (k1 == 0 and k2 == 0) or (k1 == n1 and k2 == n2):
        return 1.0
    with np.errstate(divide="ignore", invalid="ignore"):
        return float(test_proportions_2indep(k1, n1, k2, n2, method="score", compare="diff").pvalue)


def binomial_se(p: float, n: int) -> float:
    """sqrt(p (1 - p) / n), p kept half a case from the edges: an edge rate still has sampling error (a planning
    value, for n_to_decide and a difference's interval, never a test)."""
    p = min(max(p, 0.5 / n), 1 - 0.5 / n)
    return math.sqrt(p * (1 - p) / n)


@dataclass
class Pair:
    """One row's comparison before the multiplicity control, every value in the row's display unit."""
    reported: float
    reproduced: float
    unit: str
    method: str
    difference: float = math.nan
    diff_lo: float = math.nan
    diff_hi: float = math.nan
    diff_lo90: float = math.nan    # the 90% interval of the difference (two one-sided tests at 5%)
    diff_hi90: float = math.nan
    equivalent: bool = False       # the 90% interval inside +-margin (two one-sided tests)
    p_value: float = math.nan      # NaN: no test (no sampling error)
    deterministic: bool = False    # no sampling error: the verdict is the margin's
    se_p: float = math.nan         # standard errors for n_to_decide (display unit)
    se_e: float = math.nan
    n_e: int | None = None
    reported_n: int | None = None
    n_basis: str = ""


def margin_in(kind: str, unit: str, reported: float, margins: Margins) -> float:
    """The kind's margin in the row's display unit: points for a rate (/100 for a fraction), percent of the
    reported value for a count without n, r for a correlation."""
    m = margins.margins[kind].margin
    if kind == "count":
        return m * abs(reported) / 100.0
    return m / 100.0 if unit == "fraction" and kind in ("rate", "mean", "difference", "bound") else m


def _paper_n(row, est: Estimate) -> tuple[int | None, str]:
    if not pd.isna(row["n"]):
        return int(row["n"]), row.get("n_basis") or "stated"
    if est.n:
        return int(est.n), "assumed: the run's n (the paper states none)"
    return None, ""


def _proportion(row, est: Estimate, alpha: float, as_count: bool) -> Pair | None:
    """k/n beside the paper's rate (or count of its n) with its n; None when the paper's n is unknown."""
    n_p, basis = _paper_n(row, est)
    if not n_p or not est.n:
        return None
    n_e = int(est.n)
    if as_count:
        k_e, k_p, unit = int(round(est.value)), int(round(row["value"])), "percent"
    else:
        k_e, unit = int(est.k), row["unit"]
        k_p = int(round(convert(row["value"], unit, "fraction") * n_p))
    if not (0 <= k_p <= n_p):
        return None
    s = SCALE[unit]
    d95, d90 = _newcombe(k_e, n_e, k_p, n_p, 0.05), _newcombe(k_e, n_e, k_p, n_p, 2 * alpha)
    rep = s * k_p / n_p if as_count else row["value"]
    pair = Pair(rep, s * k_e / n_e, unit, "newcombe", s * (k_e / n_e - k_p / n_p), s * d95[0], s * d95[1],
                p_value=_score_p(k_e, n_e, k_p, n_p), se_p=s * binomial_se(k_p / n_p, n_p),
                se_e=s * binomial_se(k_e / n_e, n_e), n_e=n_e, reported_n=n_p, n_basis=basis)
    pair.diff_lo90, pair.diff_hi90 = s * d90[0], s * d90[1]
    return pair


def _normal(row, est: Estimate, alpha: float) -> Pair:
    """An estimate with a standard error beside the paper's value: normal, the paper's error the run's at its n."""
    unit = row["unit"]
    value, se_e = convert(est.value, est.unit, unit), convert(est.se, est.unit, unit)
    n_p, basis = _paper_n(row, est)
    se_p = se_e * math.sqrt(est.n / n_p) if n_p and est.n else se_e
    if not basis:
        basis = "assumed: the run's design and size (the paper states no n)"
    d, se_d = value - row["value"], math.hypot(se_e, se_p)
    if est.method == "fisher_z" and n_p and n_p > 3 and est.n and est.n > 3:
        z = math.atanh(min(max(value, -0.999999), 0.999999)) - math.atanh(min(max(row["value"], -0.999999), 0.999999))
        p = 2 * _sf(abs(z) / math.sqrt(1 / (est.n - 3) + 1 / (n_p - 3)))
    else:
        p = 2 * _sf(abs(d) / se_d) if se_d > 0 else (1.0 if d == 0 else 0.0)
    z90 = NORMAL.inv_cdf(1 - alpha)
    pair = Pair(row["value"], value, unit, est.method or "normal", d, d - Z95 * se_d, d + Z95 * se_d, p_value=p,
                se_p=se_p, se_e=se_e, n_e=est.n, reported_n=n_p, n_basis=basis)
    pair.diff_lo90, pair.diff_hi90 = d - z90 * se_d, d + z90 * se_d
    return pair


def _bound(row, est: Estimate, alpha: float, margin: float) -> Pair:
    """The estimate against a bound: one-sided; reproduced when its one-sided 95% limit lies on the bound's side."""
    unit = row["unit"]
    value = convert(est.value, est.unit, unit)
    upper = row["bound"] == "upper"
    beyond = value - row["value"] if upper else row["value"] - value  # > 0: on the wrong side of the bound
    if est.se == 0 or est.method == "exact":
        return Pair(row["value"], value, unit, "exact bound", value - row["value"],
                    equivalent=beyond <= margin + EDGE, deterministic=True)
    se = convert(est.se if est.se is not None else (est.hi - est.lo) / (2 * Z95), est.unit, unit)
    p = float(_sf(beyond / se)) if se > 0 else float(beyond > 0)
    limit = beyond + NORMAL.inv_cdf(1 - alpha) * se
    return Pair(row["value"], value, unit, "one-sided", value - row["value"],
                value - row["value"] - Z95 * se, value - row["value"] + Z95 * se, equivalent=limit <= margin + EDGE,
                p_value=p, se_p=0.0, se_e=se, n_e=est.n, n_basis="a bound: the paper's claim, no sampling error")


def _deterministic(row, est: Estimate, margin: float) -> Pair:
    unit = row["unit"]
    value = convert(est.value, est.unit, unit)
    d = value - row["value"]
    tol = margin + 0.5 * 10.0 ** -int(row["decimals"])
    return Pair(row["value"], value, unit, "exact", d, equivalent=abs(d) <= tol + EDGE, deterministic=True,
                n_basis="no sampling error")


def pair_of(row, est: Estimate, margins: Margins) -> Pair:
    """The comparison of one reference row (with ``kind``) and its reproduced estimate, before the multiplicity
    control."""
    kind, alpha = row["kind"], margins.alpha
    if kind == "bound":
        return _bound(row, est, alpha, margin_in("bound", row["unit"], row["value"], margins))
    if kind == "count" and est.unit == "count" and est.n and not pd.isna(row["n"]):
        pair = _proportion(row, est, alpha, as_count=True)
        if pair:
            return pair
    if kind != "exact" and est.k is not None and row["unit"] in SCALE:
        pair = _proportion(row, est, alpha, as_count=False)
        if pair:
            return pair
    if kind == "exact" or not est.se:
        return _deterministic(row, est, margin_in(kind, row["unit"], row["value"], margins))
    return _normal(row, est, alpha)


def _equivalent(pair: Pair, margin: float) -> bool:
    if pair.deterministic or pair.method == "one-sided":
        return pair.equivalent
    return -margin - EDGE <= pair.diff_lo90 and pair.diff_hi90 <= margin + EDGE


def n_to_decide(pair: Pair, margin: float, z_equivalence: float, z_difference: float) -> int | None:
    """The run's n at which the observed difference would be decided: its interval inside the margin, or
    excluding 0 at the multiplicity-adjusted level (whichever comes first); None when no n of the run decides it
    (the paper's own sampling error alone is too wide)."""
    if pair.n_e is None or not pair.se_e or math.isnan(pair.se_e):
        return None
    d, needs = abs(pair.difference), []
    if pair.method == "one-sided":
        targets = [d / z_difference] if pair.difference > 0 else [(margin + d) / z_equivalence]
    else:
        targets = [t for t in ((margin - d) / z_equivalence, d / z_difference) if t > 0]
    for t in targets:
        room = t ** 2 - pair.se_p ** 2
        if room > 0:
            needs.append(math.ceil(pair.n_e * pair.se_e ** 2 / room))
    return min(needs) if needs else None


def adjust(p_values, alpha: float, method: str) -> np.ndarray:
    """Multiplicity-adjusted p-values (statsmodels' ``multipletests``) over the finite ones; NaN stays NaN."""
    from statsmodels.stats.multitest import multipletests

    p = np.asarray(p_values, dtype=float)
    out = np.full(p.shape, np.nan)
    finite = ~np.isnan(p)
    if finite.any():
        out[finite] = multipletests(p[finite], alpha=alpha, method=method)[1]
    return out


def compare(ref: pd.DataFrame, lookup: Callable[[pd.Series], Estimate | str | None], margins: Margins,
            reason: str | None = None) -> pd.DataFrame:
    """One verdict row per reference row (``VERDICT_COLUMNS``; ``ref`` with its ``kind`` column,
    ``reference.with_kinds``). ``lookup(row)`` gives the reproduced ``Estimate``, None (not produced) or a reason
    string (not comparable); ``reason`` applies to every row (e.g. "demo data": the smoke run gets no verdict)."""
    rows, pairs = [], []
    for _, r in ref.iterrows():
        found = lookup(r)
        est, why = (None, found) if isinstance(found, str) else (found, reason)
        why = why or (est.reason if est else None) or (None if est else "not produced")
        base = {**{k: r[k] for k in ("table", "row", "column", "model", "measures", "kind", "unit")},
                "reported": float(r["value"]), "reported_n": None if pd.isna(r["n"]) else int(r["n"])}
        if not why and any(pd.isna(x) for x in (est.value, est.lo, est.hi)):
            why = "not produced: no estimate or interval"
        pair = None if why else pair_of(r, est, margins)
        if why:
            base.update(verdict=NOT_COMPARABLE, reason=_check_reason(why), n=est.n if est else None,
                        reproduced=(convert(est.value, est.unit, r["unit"]) if est and not pd.isna(est.value)
                                    else math.nan))
        else:
            if est.unit == "count" and pair.unit == "percent":  # a count of n compared as a rate
                lo, hi = (100 * x for x in wilson(int(round(est.value)), int(est.n)))
            else:
                lo, hi = (convert(x, est.unit, pair.unit) for x in (est.lo, est.hi))
            margin = margin_in(r["kind"], pair.unit, pair.reported, margins)
            base.update(unit=pair.unit, reported=pair.reported, reproduced=pair.reproduced, lo=lo, hi=hi, n=est.n,
                        reported_n=pair.reported_n or base["reported_n"], n_basis=pair.n_basis, method=pair.method,
                        difference=pair.difference, diff_lo=pair.diff_lo, diff_hi=pair.diff_hi, margin=margin,
                        p_value=pair.p_value)
        rows.append(base)
        pairs.append(pair)
    out = pd.DataFrame(rows, columns=VERDICT_COLUMNS)
    out["p_adjusted"] = adjust(out["p_value"], margins.alpha, margins.multiplicity)
    tested = int(out["p_value"].notna().sum())
    z_eq, z_diff = NORMAL.inv_cdf(1 - margins.alpha), NORMAL.inv_cdf(1 - margins.alpha / (2 * max(tested, 1)))
    decided = [_outcome(pair, margin, p_adj, margins.alpha, z_eq, z_diff) if pair else (v, why, None)
               for pair, margin, p_adj, v, why in zip(pairs, out["margin"], out["p_adjusted"], out["verdict"],
                                                      out["reason"])]
    out["verdict"], out["reason"], out["n_to_decide"] = (pd.Series(list(c), dtype=object) for c in zip(*decided)) \
        if decided else (out["verdict"], out["reason"], out["n_to_decide"])
    return out


def _outcome(pair: Pair, margin: float, p_adjusted: float, alpha: float, z_eq: float, z_diff: float):
    """(verdict, reason, n_to_decide) of one compared row: reproduced first (inside the margin), then not
    reproduced (the difference excludes 0 after the multiplicity control, or no sampling error and outside the
    margin), else inconclusive."""
    if _equivalent(pair, margin):
        return REPRODUCED, "", None
    if pair.deterministic:
        return NOT_REPRODUCED, "no sampling error: the difference exceeds the margin and the printed rounding", None
    if p_adjusted < alpha:
        return NOT_REPRODUCED, "", None
    need = n_to_decide(pair, margin, z_eq, z_diff)
    why = (f"about {need} items of the run would decide it (if the difference stays)" if need else
           "no run size decides it: the paper's own sampling error is too wide for the margin")
    return INCONCLUSIVE, why, need


def counts(verdicts: pd.DataFrame) -> dict[str, int]:
    """How many rows got each outcome (every outcome named, zero included)."""
    return {o: int((verdicts["verdict"] == o).sum()) for o in OUTCOMES}


REHEARSAL = "REHEARSAL (simulated models, planted numbers; not a reproduction)"


def summary_line(family: str, verdicts: pd.DataFrame, alpha: float = 0.05, rehearsal: bool = False) -> str:
    """"<family>: of N reported numbers, R reproduced, X not reproduced (A expected by chance), I inconclusive,
    C not comparable". A is the family-wise level when any row was tested (a faithful rerun shows a false "not
    reproduced" in at most that share of reruns), 0 when none was. When no row got a verdict the line says that
    first, with every reason the rows give ("<family>: not comparable, no verdict: all N reported numbers
    (reason; reason)"): a smoke run on demo data does not read as a failed reproduction. A dress rehearsal's line
    starts with ``REHEARSAL``."""
    c = counts(verdicts)
    lead = f"{REHEARSAL}: " if rehearsal else ""
    if len(verdicts) and c[NOT_COMPARABLE] == len(verdicts):
        reasons = verdicts["reason"].fillna("").astype(str) if "reason" in verdicts else pd.Series(dtype=str)
        named = [f"{r} ({n})" if n < len(verdicts) else r for r, n in reasons[reasons != ""].value_counts().items()]
        shown = "; ".join(named[:4]) + (f"; {len(named) - 4} more reasons in the table" if len(named) > 4 else "")
        return f"{lead}{family}: not comparable, no verdict: all {len(verdicts)} reported numbers" + (
            f" ({shown})" if shown else "")
    tested = "p_value" in verdicts and verdicts["p_value"].notna().any()
    chance = f"{alpha:g}" if tested else "0"
    return (lead + f"{family}: of {len(verdicts)} reported numbers, {c[REPRODUCED]} reproduced, {c[NOT_REPRODUCED]} not "
            f"reproduced ({chance} expected by chance), {c[INCONCLUSIVE]} inconclusive, "
            f"{c[NOT_COMPARABLE]} not comparable")
