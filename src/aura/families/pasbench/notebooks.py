"""PaSBench's notebook helpers (notebooks/pasbench/*.ipynb): rates are fractions with ``<rate>_lo`` /
``<rate>_hi`` bootstrap bounds. The generic reading / formatting / figure helpers are the core's
``aura.notebook_helpers``."""
from __future__ import annotations

PAS_RATES = {  # the paper's three settings (§4), drawn worst to best
    "worst_of_n": ("Robustness (Worst-of-N)", "#c0392b"),
    "avg_of_n": ("Accuracy (Average-of-N)", "#7f8c8d"),
    "best_of_n": ("Potential (Best-of-N)", "#2e86c1"),
}
PAS_RATE_COLUMNS = [f"{r}{s}" for r in PAS_RATES for s in ("", "_lo", "_hi")]
