"""Stage lpsbench-reproduce: every cell of the paper's Tables 3 and 4 (reference/*.csv) beside the run's, a verdict each.

The core (aura.stats.reproduction) does the verdicts and the paper's own checks (reference/checks.yaml);
``lookup`` maps a reference row to the Safe Rate cell of the stats CSVs (``safe_rate_by_risk`` for Table 3,
``safe_rate_by_domain`` for Table 4), always the **raw** variant's: the paper's Tables 3 and 4 are its main
results, without mitigation (§4.2-4.3; the mitigations are §4.5, Fig. 6).

- a risk (TS ... PI) or domain (Web ... Code) cell: safe / n with its Wilson interval (as ``safe_rate.py``
  computes it). The paper's n counts every upstream case; where the run's n differs (the paper config excludes
  the 8 cases whose upstream module is broken: TS 52 against 55, Code 86 against 90) the kit makes it
  "different n", with the excluded count named; a cell whose every case is excluded is "excluded cases".
- an "Avg." column (Avg. (benign), Avg. (adversarial), Overall Avg.): the family's average is the paper's, a mean
  of the per-part rates, for which it computes no interval (its pooled rate is another number). Comparing the
  point exactly (within when it rounds to the printed value) would call every rerun "outside" on sampling noise
  alone, so the row shows the reproduced mean and is "not produced: no interval for a mean of rates"; its parts
  carry the verdicts.
- a model the run did not evaluate (or ran in the mitigated variant only): "not produced".

On demo data or an embedded model (the default config) every row is "demo data" and ``lookup`` is not called.
"""
from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from aura.families import load
from aura.pipeline.context import StageContext
from aura.stats.reproduce import Estimate, wilson_estimate
from aura.stats.reproduction import demo_reason, read_input, write

REFERENCE = Path(__file__).resolve().parent / "reference"
INPUTS = ("safe_rate_by_risk", "safe_rate_by_domain")
VARIANT = "raw"  # the paper's Tables 3 and 4: without mitigation
# Table -> (stats table, its column naming the cell, reference column -> that column's value for the averages)
CELLS = {"Table 3": ("safe_rate_by_risk", "risk", {"Avg. (benign)": "benign_avg",
                                                   "Avg. (adversarial)": "adversarial_avg"}),
         "Table 4": ("safe_rate_by_domain", "domain_label", {"Overall Avg.": "Avg."})}
NO_INTERVAL = "not produced: no interval for a mean of rates (its parts carry the verdicts)"


def _cell(row: pd.Series, r: pd.Series) -> Estimate | str:
    safe, n, excluded = int(r["safe"]), int(r["n"]), int(r["excluded"])
    if r["row"] == "average":
        return Estimate(r["safe_rate"], math.nan, math.nan, n or None, "fraction", "mean of rates", NO_INTERVAL)
    if not n:
        return f"excluded cases: all {excluded} cases of the cell excluded (broken upstream module)" if excluded \
            else "not produced: no case of the cell in this run"
    paper_n = None if pd.isna(row["n"]) else int(row["n"])
    why = (f"different n: paper {paper_n}, reproduced {n} ({excluded} excluded: broken upstream module)"
           if excluded and paper_n and paper_n != n else None)
    return wilson_estimate(safe, n, reason=why)


def lookup_for(tables: dict[str, pd.DataFrame]):
    """``lookup(row)`` over the run's Safe Rate tables (``safe_rate_by_risk``, ``safe_rate_by_domain``)."""

    def lookup(row: pd.Series):
        if row["table"] not in CELLS:
            return "not produced: no reproduced counterpart mapped"
        name, key, averages = CELLS[row["table"]]
        frame, model = tables.get(name, pd.DataFrame()), row["model"]
        mine = frame[frame["model"] == model] if len(frame) else frame
        if mine.empty:
            return f"not produced: {model} not evaluated in this run"
        raw = mine[mine["variant"] == VARIANT]
        if raw.empty:
            return f"not produced: no {VARIANT} run of {model} (the paper's tables are without mitigation)"
        hit = raw[raw[key] == averages.get(row["column"], row["column"])]
        return _cell(row, hit.iloc[0]) if len(hit) else f"not produced: no {row['column']} cell in this run"

    return lookup


def run(ctx: StageContext) -> None:
    from . import cases_dir

    lp, raw = ctx.config.section("lpsbench"), ctx.config.raw
    emulated = (lp.get("tools") or {}).get("backend", "emulated") == "emulated"
    reason = demo_reason(ctx.config, load("lpsbench"), data=[cases_dir(raw)],
                         models=[*lp.get("evaluated", []), lp.get("evaluator"), lp.get("emulator") if emulated else None])
    write(ctx, "lpsbench", REFERENCE, lookup_for({name: read_input(ctx, name) for name in INPUTS}), reason)
