"""Confidence intervals for proportions."""
from __future__ import annotations


def wilson(k: int, n: int, alpha: float = 0.05) -> tuple[float, float]:
    """Wilson score interval of k successes in n trials (statsmodels); (NaN, NaN) when n == 0. statsmodels is
    imported by the first call, not with this module: a process that only reads verdicts (the end-of-run summary,
    through aura.stats.verdict) does not pay its 0.85 s."""
    from statsmodels.stats.proportion import proportion_confint

    if not n:
        return float("nan"), float("nan")
    lo, hi = proportion_confint(k, n, alpha=alpha, method="wilson")
    return float(lo), float(hi)
