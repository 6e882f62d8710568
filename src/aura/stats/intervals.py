"""Confidence intervals for proportions."""
from __future__ import annotations

from statsmodels.stats.proportion import proportion_confint


def wilson(k: int, n: int, alpha: float = 0.05) -> tuple[float, float]:
    """Wilson score interval of k successes in n trials (statsmodels); (NaN, NaN) when n == 0."""
    if not n:
        return float("nan"), float("nan")
    lo, hi = proportion_confint(k, n, alpha=alpha, method="wilson")
    return float(lo), float(hi)
