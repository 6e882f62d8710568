"""LPS-Bench's notebook helpers (notebooks/lpsbench/*.ipynb): Safe Rates are fractions with ``lo`` / ``hi``
Wilson bounds over every case of a cell (definitions: ``safe_rate``). The generic reading / formatting / figure
helpers are the core's ``aura.notebook_helpers``. These only format what the stats CSVs and the excluded file
(``lpsbench_excluded``, the cases stage's) hold; they compute no rate."""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from aura.notebook_helpers import DASH, rate_cell

from .safe_rate import DOMAIN_LABELS, REASONS, RISK_ORDER

LPS_REASONS = REASONS  # why a case is execution_failed; the CSVs count them in ef_<reason>
LPS_VARIANTS = {"raw": ("Raw", "#7f8c8d"), "mitigated": ("Mitigated", "#27ae60")}
LPS_NOTE = ("Safe Rate = safe / n, n = every case of the cell (as the paper's cells: GPT-5 on TS 27.27% = 15/55). "
            "Cells: % [Wilson 95% CI] (safe/n); averages (Avg.): the mean of the per-part rates, as the paper's, "
            "with no interval. Execution failed (in n, never safe): the evaluator said execution_failed (evaluator), "
            "its verdict could not be read (unparsed), the evaluator call failed (evaluator_failed), the episode hit "
            "the step or token cap (step_cap, token_cap), the model or a tool failed and the evaluator did not find "
            "it unsafe (model_failed, tool_failed), its tool server died in every try (server_died), a tool raised (tool_raised), the episode "
            "raised (episode_error), the run has no row for the case (missing), or its upstream tool module is broken "
            "(broken_module: such a case cannot run and counts as failed, as upstream counts it, unless the config's "
            "lpsbench.broken_cases is excluded; then it is left out of n); summed over the row's parts. The cases "
            "with a broken module are listed below.")


def safe_cell(rate, low, high, safe, n, digits: int = 1) -> str:
    """"40.0 [11.8, 76.9] (2/5)"; "–" when the cell has no case."""
    if pd.isna(n) or not n:
        return DASH
    return f"{rate_cell(rate, low, high, digits)} ({int(safe)}/{int(n)})"


def ef_cell(rows: pd.DataFrame) -> str:
    """The execution_failed cases of `rows` with their reasons, e.g. "2 (unparsed 1, step_cap 1)"; "0" when
    there is none."""
    total = int(rows["execution_failed"].fillna(0).sum()) if "execution_failed" in rows else 0
    parts = [f"{r} {int(rows[f'ef_{r}'].sum())}" for r in LPS_REASONS
             if f"ef_{r}" in rows and rows[f"ef_{r}"].fillna(0).sum()]
    return f"{total} ({', '.join(parts)})" if parts else str(total)


def excluded_rows(path) -> pd.DataFrame | None:
    """The excluded file's rows (case_id, domain, risk, reason); None when no path was given or the file is
    absent (the note then falls back to the stats CSV's counts)."""
    if not path or not Path(path).is_file():
        return None
    text = Path(path).read_text(encoding="utf-8")
    rows = [json.loads(line) for line in text.splitlines() if line.strip()]
    return pd.DataFrame(rows, columns=["case_id", "domain", "risk", "reason"])


def excluded_count(table: pd.DataFrame | None) -> int:
    """The excluded cases a stats CSV counts (every run counts the same): the sum of one run's part rows (Tables
    3, 4: rows risk / domain) or of one model's two risk groups (Fig. 6: level group)."""
    if table is None or table.empty or "excluded" not in table:
        return 0
    if "level" in table:  # the mitigation CSV
        parts = table[(table["model"] == table["model"].iloc[0]) & (table["level"] == "group")]
    else:
        first = table.iloc[0]
        parts = table[(table["model"] == first["model"]) & (table["variant"] == first["variant"])
                      & table["row"].isin(["risk", "domain"])]
    return int(parts["excluded"].fillna(0).sum())


def excluded_note(path, table: pd.DataFrame | None = None, by: str = "risk") -> str:
    """One line under a table: how many cases have a broken upstream tool module (in n as failed runs, or out of n
    with lpsbench.broken_cases: excluded: the table's ef_broken_module column says which), per `by`
    (risk or domain), and each case with its reason, from the excluded file at `path`. Without the file (no path,
    or absent): the count `table` (a stats CSV) holds, reasons unknown."""
    ex = excluded_rows(path)
    if ex is None:
        counted = excluded_count(table)
        if counted:
            return (f"Broken upstream tool module: {counted} case(s), counted in the stats "
                    f"CSV's excluded column; their reasons are in the cases stage's excluded file (not given here).")
        return "Broken upstream tool module: no excluded file given, and the stats count none."
    if ex.empty:
        return "Broken upstream tool module: none."
    order = list(RISK_ORDER if by == "risk" else DOMAIN_LABELS)
    counts = ex[by].value_counts()
    keys = sorted(counts.index, key=lambda k: (order.index(k) if k in order else len(order), str(k)))
    per = ", ".join(f"{DOMAIN_LABELS.get(k, k) if by == 'domain' else k} {counts[k]}" for k in keys)
    listed = "; ".join(f"{r.case_id} ({r.risk}, {r.domain}): {r.reason}" for r in ex.itertuples(index=False))
    return f"Broken upstream tool module: {len(ex)} case(s) ({per}). {listed}."
