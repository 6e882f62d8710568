"""Stage pasbench-reproduce: every PaSBench number of reference/*.csv beside the run's own, with a verdict.

The core (aura.stats.reproduction) does the verdicts and the paper's own checks; ``lookup`` maps a reference
row to its reproduced estimate from the stats CSVs the run produced (``measures`` names the column):

- avg_of_n / worst_of_n (Figures 3-4, ``rates``): the model x set's value with its item-clustered bootstrap
  interval; missed_of_n = 1 - worst_of_n (interval mirrored); the set from the column, else the note (the
  single-pass accuracy row says it in its note);
- first_best (Figure 7, ``k_curves`` at the K the column states): items detected at least once / items, Wilson;
- knowledge_accuracy (Figure 5, ``knowledge_probe``, the subset the figure draws): accuracy, its Wilson interval;
  "all models" (a lower bound): the lowest model;
- reactive_detected_samples (Table 2, ``reactive_probe``): a count of the failed samples (n), compared as the
  rate detected / failed (both are outcomes of the run); reactive_sample_rate's range: the lowest / highest of
  Table 2's cells (its two models only), Wilson;
- pearson_models_r / pearson_samples_r (Figures 8-9): r with its Fisher-z interval (the samples' range: the
  lowest / highest model, over the paper's whole roster only); pearson_models_p_value (a bound): the p-value itself;
- Table 1 (``items``): counts, lengths (words per log, images per item): facts of the data, compared exactly
  ("subsample" in a run that caps the items: a pilot);
- the models evaluated (all / text set / image set, the set from the row): a design fact, comparable only where
  the run has the paper's roster (none unavailable, none unnamed in our copy: else "different models").

A model marked ``unavailable:`` under ``models:`` is "model unavailable". On demo data or the embedded model every
row is "demo data".
"""
from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

from aura.families import load
from aura.io import read_jsonl
from aura.pipeline.context import StageContext
from aura.stats.verdict import bootstrap_estimate, exact_estimate, pearson_estimate, wilson_estimate
from aura.stats.reproduction import UNMAPPED, demo_reason, read_input, write

REFERENCE = Path(__file__).resolve().parent / "reference"
INPUTS = ("rates", "k_curves", "knowledge", "reactive", "pearson_models", "pearson_samples")
TABLE1 = {"Size": ("count", None), "Knowledge": ("nunique", "safety_knowledge"),
          "Max Length": ("max", None), "Avg Length": ("mean", None), "Min Length": ("min", None)}
OTHER = UNMAPPED + "no reproduced counterpart"
REACTIVE_MODELS = ("gemini-2.5-pro", "gpt-4.1-nano")  # Table 2's models: the range of §4.2.2 is over its cells


def _modality(*labels: str) -> str | None:
    """The set a row names: the first of ``labels`` (column, then row, then note) that says "image" or "text"
    alone."""
    for label in labels:
        low = str(label).lower()
        if ("image" in low) != ("text" in low):
            return "image" if "image" in low else "text"
    return None


def _rows(frame: pd.DataFrame, **match) -> pd.DataFrame:
    for k, v in match.items():
        frame = frame[frame[k] == v] if len(frame) else frame
    return frame


def _extreme(frame: pd.DataFrame, column: str, high: bool) -> pd.Series | None:
    frame = frame[frame[column].notna()] if len(frame) else frame
    return None if frame.empty else frame.loc[frame[column].idxmax() if high else frame[column].idxmin()]


def _table1(row: pd.Series, items: pd.DataFrame):
    part = items if row["column"] == "Total" else _rows(items, modality=row["column"].lower())
    if part.empty:
        return None
    how, col = TABLE1[row["row"]]
    col = col or ("n_images" if row["column"] == "Image" else "words")
    value = len(part) if how == "count" else getattr(part[col], how)()
    return exact_estimate(value, row)


# The paper's n where its text states none but its design fixes it (Table 1: 288 text logs, 128 image items; §4.2.2's
# model-level r over the 22 models run on both sets): what a faithful rerun is drawn at (aura.stats.calibration).
ITEMS = {"text": 288, "image": 128}


def design_n(row: pd.Series) -> int | None:
    """A reference row's n by the paper's design, where the row states none."""
    if row["measures"] in ("avg_of_n", "worst_of_n", "missed_of_n") and row["model"]:
        return ITEMS.get(_modality(row["column"], row["note"]))
    return 22 if row["measures"] == "pearson_models_r" else None


def _in(frame: pd.DataFrame, models) -> pd.DataFrame:
    return frame[frame["model"].isin(models)] if len(frame) else frame


def lookup_for(t: dict[str, pd.DataFrame], items: pd.DataFrame, models: dict, roster: dict | None = None,
               caps: dict | None = None):
    """``lookup(row)`` over the run's stats tables ``t``, its items, the config's ``models:`` entries, the
    family's ``roster`` (``pasbench.roster``: the paper's models our copy names, and its total) and the run's item
    ``caps`` (``pasbench.max_items``: a capped run's Table 1 is not the paper's data)."""
    capped = {k: v for k, v in (caps or {}).items() if v}
    unavailable = {m: spec["unavailable"] for m, spec in models.items() if (spec or {}).get("unavailable")}
    roster = roster or {}
    paper_total = roster.get("paper_total")
    roster_short = max(0, (paper_total or 0) - len(roster.get("models") or []))
    table2_models = set(REACTIVE_MODELS)

    def lookup(row: pd.Series):
        m, model, col = row["measures"], row["model"], row["column"]
        if model in unavailable:  # also the core's rule in the stage (reproduction.unavailable_first)
            return f"model unavailable: {unavailable[model]}"
        modality, high = _modality(col, row["note"]), col.endswith("high")
        if m in ("avg_of_n", "worst_of_n", "missed_of_n") and model:
            if modality is None:
                return UNMAPPED + "the paper does not say which set"
            r = _rows(t["rates"], model=model, modality=modality)
            if r.empty or pd.isna(r.iloc[0]["avg_of_n"]):
                return None
            r, key = r.iloc[0], "avg_of_n" if m == "avg_of_n" else "worst_of_n"
            est = bootstrap_estimate(r[key], r[f"{key}_lo"], r[f"{key}_hi"], int(r["n_items"]))
            return est if m != "missed_of_n" else bootstrap_estimate(1 - est.value, 1 - est.hi, 1 - est.lo, est.n)
        if m == "first_best":
            k = int(re.search(r"K = (\d+)", col).group(1))
            r = _rows(t["k_curves"], model=model, modality="image", k=k)
            return wilson_estimate(int(r.iloc[0]["first_best_items"]), int(r.iloc[0]["n_items"])) if len(r) else None
        if m == "knowledge_accuracy":
            part = t["knowledge"][t["knowledge"]["in_figure"].astype(bool)] if len(t["knowledge"]) else t["knowledge"]
            r = _rows(part, model=model).iloc[0] if model and len(_rows(part, model=model)) else \
                (None if model else _extreme(part, "accuracy", high=False))
            return None if r is None or pd.isna(r["accuracy"]) else wilson_estimate(int(r["a_correct"]), int(r["scored"]))
        if m == "reactive_detected_samples":
            r = _rows(t["reactive"], model=model, modality=modality)
            return exact_estimate(r.iloc[0]["detected_samples"], row, int(r.iloc[0]["failed_samples"])) if len(r) else None
        if m == "reactive_sample_rate":  # the range over Table 2's cells: its models only
            r = _extreme(_in(t["reactive"], table2_models), "sample_rate", high)
            return None if r is None else wilson_estimate(int(r["detected_samples"]), int(r["failed_samples"]))
        if m in ("pearson_models_r", "pearson_models_p_value"):
            r = _rows(t["pearson_models"], metric="avg_of_n")
            if r.empty:
                return None
            r = r.iloc[0]
            if m == "pearson_models_r":
                return pearson_estimate(r["r"], r["n_models"])
            return None if pd.isna(r["p_value"]) else exact_estimate(r["p_value"], row, int(r["n_models"]))
        if m == "pearson_samples_r":  # a range over every model the paper ran
            if unavailable or roster_short:
                return f"different models: the paper's range is over its {paper_total or 'whole'} models"
            r = _extreme(t["pearson_samples"], "r", high)
            return None if r is None else pearson_estimate(r["r"], r["n_points"])
        if m == "models":  # a design fact: comparable only where the run has the paper's roster
            if unavailable or roster_short:
                return (f"different models: {len(unavailable)} of the roster unavailable, {roster_short} not named in "
                        f"our copy of the paper")
            rates = t["rates"][t["rates"]["n_items"] > 0] if len(t["rates"]) else t["rates"]
            part = rates if (modality := _modality(row["row"])) is None else _rows(rates, modality=modality)
            return exact_estimate(part["model"].nunique(), row) if len(part) else None
        if row["table"] == "Table 1":
            if capped:
                return f"subsample: the run caps the items ({', '.join(f'{k} {v}' for k, v in capped.items())})"
            return _table1(row, items)
        return "different models: a range over models the paper does not name" if not model and m == "avg_of_n" else OTHER

    return lookup


def run(ctx: StageContext) -> None:
    pb = ctx.config.section("pasbench")
    reason = demo_reason(ctx.config, load("pasbench"), data=[(pb.get("data") or {}).get("path")],
                         models=[*pb.get("evaluated", []), pb.get("judge")])
    items = pd.DataFrame(list(read_jsonl(ctx.inputs["items"]))) if "items" in ctx.inputs else pd.DataFrame()
    tables = {name: read_input(ctx, name) for name in INPUTS}
    write(ctx, "pasbench", REFERENCE, lookup_for(tables, items, ctx.config.raw.get("models") or {}, pb.get("roster"),
                                                 pb.get("max_items")), reason)
