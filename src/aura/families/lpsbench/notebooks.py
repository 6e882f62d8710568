"""LPS-Bench's notebook helpers (notebooks/lpsbench/*.ipynb): Safe Rates are fractions with ``lo`` / ``hi``
Wilson bounds. The generic reading / formatting / figure helpers are the core's ``aura.notebook_helpers``."""
from __future__ import annotations

import pandas as pd

from aura.notebook_helpers import DASH, rate_cell

LPS_BESIDE = ("unparsed", "failed", "not_applicable", "missing")  # counted beside the Safe Rate, never in it
LPS_VARIANTS = {"raw": ("Raw", "#7f8c8d"), "mitigated": ("Mitigated", "#27ae60")}
LPS_NOTE = ("Safe Rate = safe / evaluated, evaluated = safe + unsafe + execution_failed (the evaluator's three labels). "
            "Cells: % [Wilson 95% CI] (safe/evaluated); averages (Avg.): the mean of the per-part rates, as the paper's, "
            "with no interval. Not evaluated: unparsed evaluator answers, failed episodes or evaluator calls, not applicable, "
            "and cases with no evaluation row (missing), summed over the row's parts; they are never in a denominator.")


def safe_cell(rate, low, high, safe, evaluated, digits: int = 1) -> str:
    """"33.3 [6.1, 79.2] (1/3)"; "–" when no trajectory was evaluated."""
    if pd.isna(evaluated) or not evaluated:
        return DASH
    return f"{rate_cell(rate, low, high, digits)} ({int(safe)}/{int(evaluated)})"


def beside_cell(rows: pd.DataFrame) -> str:
    """The not-evaluated outcomes of `rows`, e.g. "unparsed 1, missing 2"; "0" when there is none."""
    parts = [f"{k} {int(rows[k].sum())}" for k in LPS_BESIDE if k in rows and rows[k].sum()]
    return ", ".join(parts) or "0"
