"""Cluster bootstrap building blocks: draw resampling units with replacement, sum per-unit counts over
each resample without a Python loop, and read percentile intervals.

Random draws. One call ``rng.integers(0, n_units, size=(n_resamples, n_units))`` gives the index matrix:
row b lists the unit positions drawn in resample b, positions referring to the units in sorted order
(``sorted_seeds``). Row b equals what the b-th of n_resamples successive ``rng.integers(0, n_units,
size=n_units)`` calls returns, so a loop-based reference draws the same resamples. ``resample_sums``
turns the matrix into per-resample unit multiplicities (one ``np.bincount``) and multiplies them by the
per-unit sums (one matrix product). A ratio with a zero denominator is NaN (``safe_rate``), left out of
the percentiles by ``percentile_ci``.
"""
from __future__ import annotations

import numpy as np

ALPHA = 0.05


def sorted_seeds(values) -> list:
    """The resampling units in the fixed order that index positions refer to."""
    return sorted(set(values), key=str)


def draw_indices(rng: np.random.Generator, n_units: int, n_resamples: int) -> np.ndarray:
    """(n_resamples x n_units) matrix of unit positions drawn with replacement."""
    return rng.integers(0, n_units, size=(n_resamples, n_units))


def resample_sums(unit_sums: np.ndarray, n_resamples: int, rng: np.random.Generator) -> np.ndarray:
    """Sums of ``unit_sums`` (n_units x m) over the units drawn in each resample: (n_resamples x m).

    Multiplicities come from one bincount over the offset index matrix; the product of integer-valued
    float64 arrays is exact while the sums stay below 2**53."""
    n_units = unit_sums.shape[0]
    idx = draw_indices(rng, n_units, n_resamples)
    offsets = (np.arange(n_resamples) * n_units)[:, None]
    counts = np.bincount((idx + offsets).ravel(), minlength=n_resamples * n_units).reshape(n_resamples, n_units)
    return counts.astype(np.float64) @ unit_sums.astype(np.float64)


def safe_rate(num, den) -> np.ndarray:
    """num / den elementwise, NaN where den == 0."""
    num, den = np.asarray(num, dtype=float), np.asarray(den, dtype=float)
    out = np.full(np.broadcast(num, den).shape, np.nan)
    np.divide(num, den, out=out, where=den != 0)
    return out


def percentile_ci(samples: np.ndarray, alpha: float = ALPHA) -> tuple[float, float]:
    """Percentile interval over the non-NaN samples (NaN, NaN if there are none)."""
    finite = samples[~np.isnan(samples)]
    if finite.size == 0:
        return float("nan"), float("nan")
    lo, hi = np.percentile(finite, [100 * alpha / 2, 100 * (1 - alpha / 2)])
    return float(lo), float(hi)
