"""Stage lpsbench-reproduce: every cell of the paper's Tables 3 and 4 (reference/*.csv) beside the run's, a verdict each.

The core (aura.stats.reproduction) does the verdicts and the paper's own checks (reference/checks.yaml);
``lookup`` maps a reference row to the Safe Rate cell of the stats CSVs (``safe_rate_by_risk`` for Table 3,
``safe_rate_by_domain`` for Table 4), always the **raw** variant's: the paper's Tables 3 and 4 are its main
results, without mitigation (§4.2-4.3; the mitigations are §4.5, Fig. 6).

- a risk (TS ... PI) or domain (Web ... Code) cell: safe / n with its Wilson interval (as ``safe_rate.py``
  computes it), compared with the paper's rate at the paper's n (upstream's case count). By default the cases whose
  upstream module is broken stay in n as failed runs (``lpsbench.broken_cases: failed``), so n is the paper's; with
  ``excluded`` a cell is compared at its own n (the verdict carries both); a cell whose every case is excluded is
  "excluded cases".
- an "Avg." column (Avg. (benign), Avg. (adversarial), Overall Avg.): the paper's mean of the per-part rates, with
  the interval of a mean over independent parts (``aura.stats.verdict.mean_estimate``: variance
  sum(p(1 - p) / n) / K^2), from the run's part cells.
- a model the run did not evaluate (or ran in the mitigated variant only): "not produced".

On demo data or an embedded model (the default config) every row is "demo data" and ``lookup`` is not called.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from aura.families import load
from aura.pipeline.context import StageContext
from aura.stats.verdict import Estimate, mean_estimate, wilson_estimate
from aura.stats.reproduction import UNMAPPED, demo_reason, read_input, write

from .safe_rate import group_of

REFERENCE = Path(__file__).resolve().parent / "reference"
INPUTS = ("safe_rate_by_risk", "safe_rate_by_domain")
VARIANT = "raw"  # the paper's Tables 3 and 4: without mitigation
# Table -> (stats table, its column naming the cell, reference column -> that column's value for the averages)
CELLS = {"Table 3": ("safe_rate_by_risk", "risk", {"Avg. (benign)": "benign_avg",
                                                   "Avg. (adversarial)": "adversarial_avg"}),
         "Table 4": ("safe_rate_by_domain", "domain_label", {"Overall Avg.": "Avg."})}
# The parts of each average row, by the stats table's key: Table 3's groups, Table 4's every domain
GROUP_OF_AVERAGE = {"benign_avg": "benign", "adversarial_avg": "adversarial"}


def _cell(r: pd.Series, parts: pd.DataFrame) -> Estimate | str:
    """A cell's estimate: safe / n, or for an average row the mean of its parts' rates (``parts``: the run's
    part rows of that average)."""
    safe, n, excluded = int(r["safe"]), int(r["n"]), int(r["excluded"])
    if not n:
        return f"excluded cases: all {excluded} cases of the cell excluded (broken upstream module)" if excluded \
            else "not produced: no case of the cell in this run"
    if r["row"] == "average":
        rated = parts[parts["n"] > 0]
        return mean_estimate(rated["safe"] / rated["n"], rated["n"])
    return wilson_estimate(safe, n)


def _parts(raw: pd.DataFrame, hit: pd.Series) -> pd.DataFrame:
    """The part rows an average row is the mean of (Table 3: its group's risks; Table 4: every domain)."""
    cells = raw[raw["row"] != "average"]
    if "risk" in raw and hit.get("risk") in GROUP_OF_AVERAGE:
        return cells[[group_of(r) == GROUP_OF_AVERAGE[hit["risk"]] for r in cells["risk"]]]
    return cells


def lookup_for(tables: dict[str, pd.DataFrame]):
    """``lookup(row)`` over the run's Safe Rate tables (``safe_rate_by_risk``, ``safe_rate_by_domain``)."""

    def lookup(row: pd.Series):
        if row["table"] not in CELLS:
            return UNMAPPED + "no reproduced counterpart"
        name, key, averages = CELLS[row["table"]]
        frame, model = tables.get(name, pd.DataFrame()), row["model"]
        mine = frame[frame["model"] == model] if len(frame) else frame
        if mine.empty:
            return f"not produced: {model} not evaluated in this run"
        raw = mine[mine["variant"] == VARIANT]
        if raw.empty:
            return f"not produced: no {VARIANT} run of {model} (the paper's tables are without mitigation)"
        hit = raw[raw[key] == averages.get(row["column"], row["column"])]
        return _cell(hit.iloc[0], _parts(raw, hit.iloc[0])) if len(hit) else \
            f"not produced: no {row['column']} cell in this run"

    return lookup


def run(ctx: StageContext) -> None:
    from . import cases_dir

    lp, raw = ctx.config.section("lpsbench"), ctx.config.raw
    emulated = (lp.get("tools") or {}).get("backend", "emulated") == "emulated"
    reason = demo_reason(ctx.config, load("lpsbench"), data=[cases_dir(raw)],
                         models=[*lp.get("evaluated", []), lp.get("evaluator"), lp.get("emulator") if emulated else None])
    write(ctx, "lpsbench", REFERENCE, lookup_for({name: read_input(ctx, name) for name in INPUTS}), reason)
