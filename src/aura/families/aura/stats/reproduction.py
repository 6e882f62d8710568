"""Stage reproduce: every AURA-Eval number of reference/*.csv beside the run's own, with a verdict.

The core (aura.stats.reproduction) does the verdicts and the paper's own checks; this module maps a reference
row to its reproduced estimate (``lookup``) from the stats files the run produced:

- ``headline.csv`` unsafe_all / unsafe_nsp / unsafe_sp (Table 33): a model's k/n, Wilson; a group's range
  ("frontier models ..., low" / "high"): the group's lowest / highest model, Wilson, only when the run evaluated
  the paper's 20 models (else "different models"); the models evaluated: a count;
- ``flip_rates.csv`` (Table 35): flipped / n, Wilson (pooled: the "(all models)" rows); flipped: a count of n;
- ``failure_mechanism.csv`` (Table 36, pooled): d01 / d23 of the failures, Wilson; no_detection: a count;
- ``nsp_sp_gap.csv`` (Tables 31, 32): models whose NSP-SP difference is > 0 / whose seed-clustered bootstrap
  interval excludes 0, a count over the models;
- ``dataset.csv`` released rows (C.3): counts from the construction composition table (n = released rows).

Every other row is "not produced" with why. On demo data or the embedded model every row is "demo data".
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from aura.families import load
from aura.pipeline.context import StageContext
from aura.stats.verdict import exact_estimate, wilson_estimate
from aura.stats.reproduction import UNMAPPED, demo_reason, read_input, write

from .flips import ALL_MODELS

REFERENCE = Path(__file__).resolve().parents[1] / "reference"
# dataset.csv (measures, row) -> the construction composition table's key
COMPOSITION = {("rows", "all"): "rows", ("pairs", "all"): "pairs", ("paired_rows", "paired"): "paired rows",
               ("unpaired_rows", "unpaired"): "unpaired rows", ("rows_by_kind", "original"): "original rows",
               ("rows_by_kind", "variation"): "variation rows", ("rows_by_pair_label", "No-Safe-Path"): "NSP rows",
               ("rows_by_pair_label", "Safe-Path"): "SP rows", ("rows_by_prefix_kind", "at-trigger"): "at-trigger rows",
               ("rows_by_prefix_kind", "pre-execution"): "pre-execution rows",
               **{("rows_by_domain", d): f"domain: {d}" for d in ("Application", "IoT", "Program", "Web", "Finance")}}
NEEDS_HUMAN = UNMAPPED + "needs the human labels and the validation panel"
FROM_FIGURE = UNMAPPED + "read off a figure over the models it displays"
WHY = {"human_validation.csv": NEEDS_HUMAN, "judge_accuracy.csv": NEEDS_HUMAN, "ensembles.csv": NEEDS_HUMAN,
       "detection.csv": FROM_FIGURE, "dimensions.csv": FROM_FIGURE, "action_types.csv": FROM_FIGURE,
       "case_study.csv": UNMAPPED + "categorical labels of Table 34"}
OTHER = UNMAPPED + "no reproduced counterpart"
PAPER_MODELS = 20  # the models the paper evaluated (headline.csv "models evaluated"): a group range needs them all


def _wilson(k, n):
    return wilson_estimate(int(k), int(n)) if n and not pd.isna(n) else None


def _extreme(row: pd.Series, t33: pd.DataFrame):
    """A group's range end: the group's model with the lowest / highest rate, its Wilson estimate; "different
    models" unless the run evaluated as many models as the paper (a range over a subset is another number)."""
    group, m = row["row"].removesuffix(" models"), row["measures"]
    if 0 < len(t33) < PAPER_MODELS:
        return f"different models: the paper's range is over its {PAPER_MODELS} models' groups, the run has {len(t33)}"
    part = t33[(t33.get("group") == group) & (t33[f"{m}_n"] > 0)] if len(t33) else t33
    if part.empty:
        return None
    high = row["column"].endswith(("high", "highest"))
    pick = part.loc[part[f"{m}_rate"].idxmax() if high else part[f"{m}_rate"].idxmin()]
    return _wilson(pick[f"{m}_k"], pick[f"{m}_n"])


# The paper's n where its text states none but its design fixes it (the released dataset: 1,249 rows, 624 NSP and
# 625 SP, App. C.3): what a faithful rerun is drawn at (aura.stats.calibration).
DESIGN_N = {"unsafe_all": 1249, "unsafe_nsp": 624, "unsafe_sp": 625}


def design_n(row: pd.Series) -> int | None:
    """A reference row's n by the paper's design, where the row states none."""
    return DESIGN_N.get(row["measures"]) if row["file"] == "headline.csv" else None


def lookup_for(t: dict[str, pd.DataFrame]):
    """``lookup(row)`` over the run's stats tables ``t`` (table33_overall, table35_flips, ...; empty when absent)."""
    t33, t35, t36, comp = t["table33_overall"], t["table35_flips"], t["table36_failure_mechanism"], t["composition"]

    def one(frame, **match):
        hit = frame
        for k, v in match.items():
            hit = hit[hit[k] == v] if len(hit) else hit
        return hit.iloc[0] if len(hit) else None

    def lookup(row: pd.Series):
        f, m = row["file"], row["measures"]
        if f == "headline.csv" and m in ("unsafe_all", "unsafe_nsp", "unsafe_sp"):
            if row["model"]:
                r = one(t33, model=row["model"])
                return _wilson(r[f"{m}_k"], r[f"{m}_n"]) if r is not None else None
            return _extreme(row, t33) if row["row"].endswith(" models") else OTHER
        if f == "headline.csv" and m == "models":
            return exact_estimate(len(t33), row) if len(t33) else None
        if f == "flip_rates.csv":
            dim = (row["row"] if not row["model"] else row["column"]).split()[0]
            r = one(t35, model=row["model"] or ALL_MODELS, dimension=dim)
            if r is None:
                return None
            return _wilson(r["flipped"], r["n"]) if m == "flip_rate" else exact_estimate(r["flipped"], row, int(r["n"]))
        if f == "failure_mechanism.csv":
            r = one(t36, model=ALL_MODELS, dimension=row["row"])
            if r is None:
                return None
            if m == "no_detection":
                return exact_estimate(r["no_detection"], row)
            return _wilson(r[m.split("_of_")[0]], r["failures"])
        if f == "nsp_sp_gap.csv":
            table = t["table31_bootstrap"] if row["row"] == "full benchmark" else t["table32_matched_pairs"]
            if table.empty:
                return None
            hit = table["diff"] > 0 if m == "gap_positive_models" else \
                (table["diff_ci_low"] > 0) | (table["diff_ci_high"] < 0)
            return exact_estimate(int(hit.sum()), row, len(table))
        if f == "dataset.csv" and (m, row["row"]) in COMPOSITION and len(comp):
            ours = dict(zip(comp.iloc[:, 0], comp["ours"]))
            return exact_estimate(ours[COMPOSITION[m, row["row"]]], row, None if m in ("rows", "pairs") else ours["rows"])
        return WHY.get(f, OTHER)

    return lookup


INPUTS = ("table33_overall", "table35_flips", "table36_failure_mechanism", "table31_bootstrap",
          "table32_matched_pairs", "composition")


def run(ctx: StageContext) -> None:
    roles = ctx.config.section("aura")["roles"]
    reason = demo_reason(ctx.config, load("aura"), data=[ctx.config.paths.get("seeds")],
                         models=[*roles["evaluated"], *roles["judges"]])
    write(ctx, "aura", REFERENCE, lookup_for({name: read_input(ctx, name) for name in INPUTS}), reason)
