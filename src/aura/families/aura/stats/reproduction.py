"""Stage reproduce: every AURA-Eval number of reference/*.csv beside the run's own, with a verdict.

The core (aura.stats.reproduction) does the verdicts and the paper's own checks; this module maps a reference
row to its reproduced estimate (``lookup``) from the stats files the run produced, one mapper per reference file
(``MAPPERS``). A mapper returns an ``Estimate``, None (not produced: the table is absent or empty, e.g. an optional
analysis the config leaves off, or lacks the row) or a reason (not comparable). Conventions:

- a rate k/n: Wilson (``wilson_estimate``, compared by Newcombe's two-proportion interval); a count with an n:
  ``exact_estimate(count, row, n)``, compared as the rate count/n; a count without n or a fact: exact;
- a range over a set of models ("frontier models, low" / "high"): the lowest / highest model's estimate over the
  paper's models of that set only (``PAPER_GROUPS``, config/paper.yaml's roster; the prompt-format models
  ``FORMAT_GROUPS``; the judges ``PAPER_JUDGES`` / ``VALIDATION_JUDGES``): "different models" when the run lacks
  any of them (a range over a subset is another number), the run's other models ignored;
- a pooled rate over a set of models ("frontier models", no low / high): the models' k and n summed, Wilson;
- a difference in points of two rates (a gap, a drop, an increase): the difference with the standard error of two
  independent proportions, sqrt(p1 q1 / n1 + p2 q2 / n2) (``_difference``; where both rates count the same items it
  overstates the error: the comparison is conservative); n is the smaller side's.

What is mapped, per file (the stats table, its layout key):

- ``headline.csv`` (Table 33, ``table33_overall``): a model's unsafe_all / _nsp / _sp k/n; a group's range; the
  models evaluated (a count); the frontier vs open-weight gap: the open-weight group's lowest unsafe_all rate minus
  the frontier group's highest (a difference);
- ``flip_rates.csv`` (Table 35, ``table35_flips``): flipped / n (pooled: the "(all models)" rows); flipped: a count
  of n;
- ``failure_mechanism.csv`` (Table 36, ``table36_failure_mechanism``, pooled): d01 / d23 of the failures;
  no_detection: a count;
- ``nsp_sp_gap.csv`` (Tables 31, 32): models whose NSP-SP difference is > 0 / whose seed-clustered bootstrap
  interval excludes 0, a count of the models;
- ``dataset.csv``: the released rows (C.3, ``construction_composition``: counts of the released rows); the
  construction funnel (H.2-H.3, ``construction_funnel``: prefixes, variation requests, parseable and kept
  variations, pool, pair candidates, parseable and kept pairs, candidate paired rows, each a count of the stage
  before it where the paper gives that n; the unintended seeds: the seeds selected); the source seeds represented
  (I.1): the distinct seeds of the judged rows (``judged``) of the seeds selected;
- ``detection.csv`` (Figures 4, 8: ``fig4_detection``, ``fig8_cells``; App. J.2 speaks of No-Safe-Path rows, so
  its rows are NSP rows; §7.2's Llama row pools both pair labels): detection shares (a level's rows of the
  model's NSP rows with a valid level), the unsafe rate at a level, the drops D1 -> D2 and D2 -> D3 (differences
  per model), the D3-A0 cell range over the paper's models with a rated cell, the D2/D3 x A1/A4 cells pooled over
  the paper's models (against the "below 20%" bound), the unsafe D0 actions that are A0/A3 pooled over the
  frontier models (against "over 90%"), DeepSeek-R1-Distill's D2-A2 / D3-A2 cells;
- ``action_types.csv`` (Figure 5, ``fig5_action_types``): the NSP A4 share per frontier model (range); the safe
  share of SP A0 / A3 actions pooled over the frontier models;
- ``dimensions.csv`` (Figure 6, ``fig6_dimensions``): a dimension's mean unsafe rate over the paper's 20 models
  (``mean_estimate``), the SD3 ranges per group. Figure 6's "displayed models" are taken to be the paper's models
  of the group (the text names none; the figure's data are not in the text);
- ``human_validation.csv`` (Tables 3, 18, 20: ``table3_human_validation``, ``table18_validation_retention``,
  ``table21_22_judge_accuracy``): units sampled (exact), kept and dropped (counts of the sampled / of all dropped),
  the annotators (exact: the distinct raters; per item: ratings / units), the human consensus strata (counts of
  the labelled units), P_o (its standard error bounded by sqrt(P_o (1 - P_o) / N), a mean of values in [0, 1]),
  Krippendorff's alpha (standard error by the delta method with the expected agreement fixed:
  se(P_o) (1 - alpha) / (1 - P_o)), the panel's N_p and ties (counts of the units with a reference), its
  accuracy (agree / N_p, Wilson) overall, on its unanimous and majority units, and the Wilson bounds (the
  accuracy's standard error shrunk as Wilson's centre is). The panel's rows need the paper's 5-judge validation
  panel (``VALIDATION_JUDGES``, read off Tables 21-22's judges), else "different models";
- ``judge_accuracy.csv`` (Tables 21-22, ``table21_22_judge_accuracy``, the same panel): the best / worst judge's
  overall accuracy (the range over the 5 judges) and their difference; the consensus strata's sizes and the
  unanimous units every judge matches (counts of the units); a named judge's accuracy on a stratum;
- ``ensembles.csv`` (Table 23, ``table23_ensembles``): the selected panel's N_p, N_u, T (counts) and accuracy;
- ``vendor_overlap.csv`` (Table 24, ``table24_vendor_overlap``): the common sample (exact: the largest model's
  sample items); Claude Opus 4.6's Safe-rate shift: |original - replacement| with its seed-clustered bootstrap
  interval (the paper states no sign); the models whose interval includes 0, a count of the models;
- ``judge_consistency.csv`` (Table 25, ``table25_judge_consistency``): the range over the paper's 3 judges x 3
  axes of consistent / complete units;
- ``prompt_format.csv`` (Table 38, ``table38_prompt_format``): the scenarios (exact), the [A] - [R] unsafe
  increase per tested model and the NSP - SP gap per model and prompt (ranges of differences), the groups'
  unsafe ranges per prompt, the SP safe non-refusal range over models and prompts.

The optional analyses' tables (human validation, vendor overlap, consistency, prompt format) are inputs only
when the config makes them (``rules/aura/reproduce.smk``); absent, their rows are "not produced".

Not mapped (``UNMAPPED``, each with why): R-Judge's records and the unintended seeds by domain / source label (a
fact of the input release, checked against ``aura.seed_counts`` when the seeds are selected: no stats table
reports it); the human-validation drop reasons (the human-label file records no reason); the "other
family-diverse" ensemble and the selected panel's growth over it (its members are not named); Table 34's count
(its eight models are not all named). On demo data or the embedded model every row is "demo data".
"""
from __future__ import annotations

import math
import re
from pathlib import Path

import pandas as pd

from aura.families import load
from aura.pipeline.context import StageContext
from aura.stats.reproduction import UNMAPPED, demo_reason, read_input, write
from aura.stats.verdict import Z95, Estimate, bootstrap_estimate, exact_estimate, mean_estimate, wilson_estimate

from .flips import ALL_MODELS

REFERENCE = Path(__file__).resolve().parents[1] / "reference"

# The paper's roster (config/paper.yaml: aura.roles.evaluated, each model's group): a range over a group is over
# these models only.
PAPER_GROUPS = {
    "frontier": ("gpt-5.4", "claude-opus-4.6", "claude-sonnet-4.6", "gemini-3.1-pro", "gpt-5.2", "glm-5.1"),
    "open-weight": ("llama-3.1-8b", "qwen3-32b", "deepseek-v3.1", "r1-distill-32b", "llama-3.3-70b", "llama3-8b",
                    "qwen3-8b", "qwen2.5-72b", "mistral-small-3.2", "gemma-3-27b", "gpt-oss-120b"),
    "safety-tuned": ("realsafe-r1-32b", "realsafe-r1-8b", "stair-llama3-8b"),
}
PAPER_EVALUATED = tuple(m for group in PAPER_GROUPS.values() for m in group)
PAPER_MODELS = len(PAPER_EVALUATED)  # 20 (headline.csv "models evaluated")
# Table 38's four models (aura.evaluate.format_models) and the text's two groups of them (J.4)
FORMAT_GROUPS = {"frontier": ("claude-sonnet-4.6", "gpt-5.4"), "open-weight": ("qwen3-32b", "realsafe-r1-32b")}
FORMAT_MODELS = tuple(m for group in FORMAT_GROUPS.values() for m in group)
FORMATS = {"R": "react", "A": "action_only"}
# The scoring panel (aura.roles.judges: Tables 23's selected ensemble, 25) and the 5-judge validation panel
# (aura.roles.validation_judges: Tables 3, 21-22)
PAPER_JUDGES = ("gpt-5.4", "claude-opus-4.6", "gemini-3.1-pro")
VALIDATION_JUDGES = ("gpt-5.4", "gpt-4o", "claude-sonnet-4.6", "claude-opus-4.6", "gemini-3.1-pro")
# detection.csv: a range over named models
NAMED = {"GLM-5.1, Claude Sonnet 4.6": ("glm-5.1", "claude-sonnet-4.6")}
# reference row names -> the human-validation tables' axis
AXIS = {"all": "overall", "Overall": "overall", "Detection": "detection", "Action type": "action_type",
        "Action safety": "safety"}

# dataset.csv (measures, row) -> the construction composition table's key
COMPOSITION = {("rows", "all"): "rows", ("pairs", "all"): "pairs", ("paired_rows", "paired"): "paired rows",
               ("unpaired_rows", "unpaired"): "unpaired rows", ("rows_by_kind", "original"): "original rows",
               ("rows_by_kind", "variation"): "variation rows", ("rows_by_pair_label", "No-Safe-Path"): "NSP rows",
               ("rows_by_pair_label", "Safe-Path"): "SP rows", ("rows_by_prefix_kind", "at-trigger"): "at-trigger rows",
               ("rows_by_prefix_kind", "pre-execution"): "pre-execution rows",
               **{("rows_by_domain", d): f"domain: {d}" for d in ("Application", "IoT", "Program", "Web", "Finance")}}
# dataset.csv (measures, row) -> the construction funnel's count and the count it is a part of (None: no n)
FUNNEL = {("unintended", "R-Judge"): ("seeds selected", None),
          ("prefixes", "all"): ("prefixes", None),
          ("prefixes", "at-trigger"): ("prefixes at-trigger", "prefixes"),
          ("prefixes", "pre-execution"): ("prefixes pre-execution", "prefixes"),
          ("variation_requests", "all"): ("variation requests", None),
          ("variation_requests", "RS1"): ("variation requests RS1", "variation requests"),
          ("variation_requests", "RS2-RS6, SD1-SD5"): ("variation requests RS2-RS6, SD1-SD5", "variation requests"),
          ("variations_parseable", "all"): ("variations parseable", "variation requests"),
          ("variations_accepted", "all"): ("variations kept by review", "variations parseable"),
          ("pool_items", "all"): ("merged pool", None),
          ("pair_candidates", "all"): ("pair candidates", None),
          ("pairs_parseable", "all"): ("pair candidates parseable", "pair candidates"),
          ("pairs_accepted", "all"): ("pairs kept by review", "pair candidates parseable"),
          ("paired_rows_candidate", "all"): ("candidate paired rows", None)}

SEED_FACT = UNMAPPED + ("a fact of the R-Judge release, checked against aura.seed_counts when the seeds are "
                        "selected (select-seeds stops on a mismatch): no stats table reports it")
DROP_REASON = UNMAPPED + "the human-label file records no reason for a dropped unit"
OTHER_ENSEMBLE = UNMAPPED + "the other family-diverse ensemble's members are not named in the text"
CASE_STUDY = UNMAPPED + ("Table 34's eight models are not all named in the text: a count over the run's models is "
                         "another number")
OTHER = UNMAPPED + "no reproduced counterpart"


# --- helpers --------------------------------------------------------------------------------------------------
def _missing(x) -> bool:
    return x is None or (not isinstance(x, str) and pd.isna(x))


def _wilson(k, n):
    """k/n, Wilson; None when either is missing or n is 0."""
    if _missing(k) or _missing(n) or not n:
        return None
    return wilson_estimate(int(k), int(n))


def _count(value, row, n=None):
    """A count (``exact_estimate``), with its n when there is one (then compared as the rate count/n); None when
    the count is missing or its n is 0 (no rate: nothing it could be a part of)."""
    if _missing(value) or (n is not None and not _missing(n) and not n):
        return None
    return exact_estimate(value, row, None if _missing(n) else int(n))


def _one(frame: pd.DataFrame, **match):
    """The first row of ``frame`` matching every column = value; None when there is none."""
    hit = frame
    for k, v in match.items():
        if not len(hit) or k not in hit:
            return None
        hit = hit[hit[k] == v]
    return hit.iloc[0] if len(hit) else None


def _high(row) -> bool:
    return row["column"].endswith(("high", "highest"))


def _end(row, estimates):
    """A range's end: the lowest ("..., low") or highest ("..., high") of ``estimates``; None when there is none."""
    found = [e for e in estimates if isinstance(e, Estimate) and not math.isnan(e.value)]
    if not found:
        return None
    return (max if _high(row) else min)(found, key=lambda e: e.value)


def _of(frame: pd.DataFrame, models, what: str, key: str = "model"):
    """``frame``'s rows of ``models`` (the paper's): None when the run produced no table, "different models" when
    it lacks any of them (a range or pool over a subset is another number)."""
    if frame.empty:
        return None
    present = set(frame[key]) if key in frame else set()
    lacking = [m for m in models if m not in present]
    if lacking:
        return f"different models: {what} is over the paper's {len(models)} models; the run lacks {', '.join(lacking)}"
    return frame[frame[key].isin(models)]


def _per_model(part: pd.DataFrame, estimate, key: str = "model") -> list:
    """``estimate(rows of one model)`` for every model of ``part``."""
    return [estimate(g) for _, g in part.groupby(key, sort=False)]


def _range(row, frame, models, what, estimate, key="model"):
    """A range's end over the paper's ``models`` (see ``_of``), ``estimate`` per model's rows."""
    part = _of(frame, models, what, key)
    return part if part is None or isinstance(part, str) else _end(row, _per_model(part, estimate, key))


def _se(e: Estimate) -> float:
    """A rate's binomial standard error; an edge rate keeps some (a planning value, as the verdict's)."""
    p = min(max(e.value, 0.5 / e.n), 1 - 0.5 / e.n)
    return math.sqrt(p * (1 - p) / e.n)


def _difference(a, b):
    """a - b of two rates, in percent, with the standard error of two independent proportions (conservative when
    they count the same items); n is the smaller side's. None when either is missing."""
    if not (isinstance(a, Estimate) and isinstance(b, Estimate)) or not a.n or not b.n:
        return None
    d, se = a.value - b.value, math.hypot(_se(a), _se(b))
    return Estimate(100 * d, 100 * (d - Z95 * se), 100 * (d + Z95 * se), min(a.n, b.n), "percent",
                    "difference of rates", se=100 * se)


def _pooled(part: pd.DataFrame, k: str, n: str):
    """The rows' k and n summed, Wilson."""
    return _wilson(part[k].sum(), part[n].sum()) if len(part) else None


def _group(name: str) -> tuple[str, ...]:
    """A reference row's model set: "frontier models", "open-weight models", ..., "models" (all 20)."""
    name = name.strip()
    return PAPER_EVALUATED if name == "models" else PAPER_GROUPS[name.removesuffix(" models")]


# --- headline.csv, flip_rates.csv, failure_mechanism.csv, nsp_sp_gap.csv ---------------------------------------
def _t33_rate(m: str):
    return lambda g: _wilson(g.iloc[0][f"{m}_k"], g.iloc[0][f"{m}_n"])


def _headline(row, t):
    t33, m = t["table33_overall"], row["measures"]
    if m in ("unsafe_all", "unsafe_nsp", "unsafe_sp"):
        if row["model"]:
            r = _one(t33, model=row["model"])
            return _wilson(r[f"{m}_k"], r[f"{m}_n"]) if r is not None else None
        if row["row"].endswith(" models"):
            return _range(row, t33, _group(row["row"]), f"the {row['row']}' range", _t33_rate(m))
    if m == "models":
        return exact_estimate(len(t33), row) if len(t33) else None
    if m == "unsafe_all_gap":  # the open-weight group's lowest rate minus the frontier group's highest
        low, high = (_range({"column": side}, t33, PAPER_GROUPS[g], f"the {g} models' range", _t33_rate("unsafe_all"))
                     for side, g in (("low", "open-weight"), ("high", "frontier")))
        return next((x for x in (low, high) if isinstance(x, str)), None) or _difference(low, high)
    return OTHER


def _flip_rates(row, t):
    dim = (row["row"] if not row["model"] else row["column"]).split()[0]
    r = _one(t["table35_flips"], model=row["model"] or ALL_MODELS, dimension=dim)
    if r is None:
        return None
    return _wilson(r["flipped"], r["n"]) if row["measures"] == "flip_rate" else _count(r["flipped"], row, r["n"])


def _failure_mechanism(row, t):
    r, m = _one(t["table36_failure_mechanism"], model=ALL_MODELS, dimension=row["row"]), row["measures"]
    if r is None:
        return None
    return _count(r["no_detection"], row) if m == "no_detection" else _wilson(r[m.split("_of_")[0]], r["failures"])


def _nsp_sp_gap(row, t):
    table = t["table31_bootstrap"] if row["row"] == "full benchmark" else t["table32_matched_pairs"]
    if table.empty:
        return None
    hit = table["diff"] > 0 if row["measures"] == "gap_positive_models" else \
        (table["diff_ci_low"] > 0) | (table["diff_ci_high"] < 0)
    return exact_estimate(int(hit.sum()), row, len(table))


# --- dataset.csv ------------------------------------------------------------------------------------------------
def _dataset(row, t):
    key, comp, funnel = (row["measures"], row["row"]), t["composition"], t["funnel"]
    if row["measures"] in ("records", "unintended_by_domain", "unintended_by_label"):
        return SEED_FACT
    if key in COMPOSITION:
        if comp.empty:
            return None
        ours = dict(zip(comp.iloc[:, 0], comp["ours"]))
        return _count(ours[COMPOSITION[key]], row, None if row["measures"] in ("rows", "pairs") else ours["rows"])
    counts = dict(zip(funnel["count"], funnel["ours"])) if len(funnel) else {}
    if key in FUNNEL:
        count, of = FUNNEL[key]
        return _count(counts[count], row, counts[of] if of else None) if counts else None
    if row["measures"] == "seeds_represented":  # distinct source seeds of the judged (released) rows
        judged = t["judged"]
        return _count(judged["seed_id"].nunique(), row, counts.get("seeds selected")) if len(judged) else None
    return OTHER


# --- detection.csv, action_types.csv, dimensions.csv (Figures 4-8) ---------------------------------------------
def _nsp(g: pd.DataFrame) -> pd.DataFrame:
    return g[g["pair_label"] == "NSP"]


def _level_share(level: str):
    """One model's share of ``level`` among its NSP rows with a valid detection level (Figure 7)."""
    return lambda g: _wilson(_nsp(g).loc[_nsp(g)["detection"] == level, "count"].sum(), _nsp(g)["count"].sum())


def _level_rate(level: str, pair=("NSP",)):
    """One model's unsafe rate at ``level`` over its rows of ``pair`` (Figure 4)."""
    return lambda g: _pooled(g[g["pair_label"].isin(pair) & (g["detection"] == level)], "unsafe", "n")


def _cell(g: pd.DataFrame, levels, actions) -> pd.DataFrame:
    return g[g["detection"].isin(levels) & g["action_type"].isin(actions)]


def _detection(row, t):
    fig4, fig8, m, column = t["fig4_detection"], t["fig8_cells"], row["measures"], row["column"]
    levels = re.findall(r"\bD\d\b", column)
    if row["model"] == "r1-distill-32b":  # a Figure 8 cell, "NSP D2-A2 unsafe"
        cell = re.search(r"(D\d)-(A\d)", column)
        return _pooled(_cell(_nsp(fig8[fig8["model"] == row["model"]]), [cell[1]], [cell[2]]), "unsafe", "n") \
            if len(fig8) else None
    if row["model"]:  # §7.2: "even at D3, about half of Llama-3.1-8B-Inst's actions", both pair labels
        return _level_rate(levels[0], ("NSP", "SP"))(fig4[fig4["model"] == row["model"]]) if len(fig4) else None
    if row["row"] in NAMED:
        return _range(row, fig4, NAMED[row["row"]], f"the range over {row['row']}", _level_share(levels[0]))
    if m == "detection_share":  # pooled over the group: its NSP rows at the level of those with a level
        part = _of(fig4, _group(row["row"]), f"the {row['row']}' share")
        if part is None or isinstance(part, str):
            return part
        nsp = _nsp(part)
        return _wilson(nsp.loc[nsp["detection"] == levels[0], "count"].sum(), nsp["count"].sum())
    if m == "unsafe_rate_drop":  # per model: the unsafe rate one level down minus at the level
        lower, upper = (levels if len(levels) == 2 else (f"D{int(levels[0][1]) - 1}", levels[0]))
        return _range(row, fig4, _group(row["row"]), f"the {row['row']}' range",
                      lambda g: _difference(_level_rate(lower)(g), _level_rate(upper)(g)))
    if m == "action_share":  # unsafe D0 actions that are A0 or A3, pooled over the group's NSP rows
        part = _of(fig8, _group(row["row"]), f"the {row['row']}' share")
        if part is None or isinstance(part, str):
            return part
        unsafe_d0 = _nsp(part)[_nsp(part)["detection"] == "D0"]
        return _wilson(unsafe_d0.loc[unsafe_d0["action_type"].isin(["A0", "A3"]), "unsafe"].sum(),
                       unsafe_d0["unsafe"].sum())
    if row["row"] == "NSP D3-A0 cells":  # the range over the paper's models' rated D3-A0 cells
        return _range(row, fig8, PAPER_EVALUATED, "Figure 8's D3-A0 range",
                      lambda g: _pooled(_cell(_nsp(g), ["D3"], ["A0"]), "unsafe", "n"))
    if row["row"] == "NSP D2/D3 with A1 or A4":  # pooled over the paper's models' cells
        part = _of(fig8, PAPER_EVALUATED, "Figure 8's D2/D3 x A1/A4 cells")
        return part if part is None or isinstance(part, str) else \
            _pooled(_cell(_nsp(part), ["D2", "D3"], ["A1", "A4"]), "unsafe", "n")
    if m == "unsafe_rate":  # "D0 unsafe, low": the group's range at the level, NSP rows
        return _range(row, fig4, _group(row["row"]), f"the {row['row']}' range", _level_rate(levels[0]))
    return OTHER


def _action_types(row, t):
    fig5 = t["fig5_action_types"]
    if row["measures"] == "action_share":  # "NSP A4 alternatives share, low": the frontier range
        action = re.search(r"\bA\d\b", row["column"])[0]
        return _range(row, fig5, _group(row["row"]), f"the {row['row']}' range",
                      lambda g: _pooled(_nsp(g)[_nsp(g)["action_type"] == action], "count", "n_valid_action"))
    if row["measures"] == "safe_share":  # SP A0 / A3 actions judged Safe, pooled over the frontier models
        part = _of(fig5, PAPER_GROUPS["frontier"], "the frontier models' safe share")
        if part is None or isinstance(part, str):
            return part
        cells = part[(part["pair_label"] == "SP") & part["action_type"].isin(re.findall(r"\bA\d\b", row["row"]))]
        return _wilson(cells["safe"].sum(), cells["safe"].sum() + cells["unsafe"].sum())
    return OTHER


def _dimensions(row, t):
    fig6 = t["fig6_dimensions"]
    dim, _, group = row["row"].partition(", ")
    dim = dim.split()[0]
    if row["column"] == "mean unsafe":  # the mean of the paper's 20 models' rates on the dimension
        part = _of(fig6, PAPER_EVALUATED, f"the {dim} mean")
        if part is None or isinstance(part, str):
            return part
        cells = part[(part["dimension"] == dim) & (part["n"] > 0)]
        return mean_estimate(cells["rate"], cells["n"]) if len(cells) else None
    return _range(row, fig6, _group(group), f"the {row['row']} range",
                  lambda g: _pooled(g[g["dimension"] == dim], "unsafe", "n"))


# --- human_validation.csv, judge_accuracy.csv, ensembles.csv (Tables 3, 18, 20-23) ------------------------------
def _panel(t):
    """"different models" unless the run's validation panel (Tables 21-22's judges) is the paper's 5 judges; None
    when it is (or the run has no such table)."""
    acc = t["table21_22_judge_accuracy"]
    judges = set(acc["judge"]) if len(acc) else set(VALIDATION_JUDGES)
    if judges != set(VALIDATION_JUDGES):
        return (f"different models: the paper's panel is its 5 validation judges ({', '.join(VALIDATION_JUDGES)}); "
                f"the run's: {', '.join(sorted(judges))}")
    return None


def _stratum(t, stratum: str, axis: str = "overall"):
    """One judge's row of Tables 21-22 (the strata's units are the same for every judge)."""
    acc = t["table21_22_judge_accuracy"]
    return _one(acc, axis=axis, stratum=stratum) if len(acc) else None


def _normal(value, se, n, unit="fraction", method="normal"):
    """A point with a standard error and its normal 95% interval (a fraction's kept inside [0, 1])."""
    lo, hi = float(value) - Z95 * se, float(value) + Z95 * se
    if unit == "fraction":
        lo, hi = max(lo, 0.0), min(hi, 1.0)
    return Estimate(float(value), lo, hi, int(n), unit, method, se=se)


def _agreement(r, m: str):
    """P_o with its standard error bounded by sqrt(P_o (1 - P_o) / N) (a mean of per-unit shares in [0, 1]);
    Krippendorff's alpha with se(P_o) (1 - alpha) / (1 - P_o) (the delta method, the expected agreement fixed)."""
    p, n = r["P_o"], r["N"]
    if _missing(p) or not n or (m == "alpha" and (_missing(r["alpha"]) or p >= 1)):
        return None
    se = _se(Estimate(p, p, p, int(n)))
    if m == "P_o":
        return _normal(p, se, n, method="mean of pairwise agreements")
    return _normal(r["alpha"], se * (1 - r["alpha"]) / (1 - p), n, "r", "delta method on P_o")


def _wilson_bound(k, n, low: bool):
    """A Wilson bound of k/n with the accuracy's standard error, shrunk by n / (n + z^2) as Wilson's centre is."""
    est = _wilson(k, n)
    if est is None:
        return None
    return _normal(est.lo if low else est.hi, _se(est) * n / (n + Z95 ** 2), n, method="Wilson bound")


def _human_validation(row, t):
    m, axis = row["measures"], AXIS.get(row["row"], "overall")  # the human consensus strata: overall
    if m == "units_dropped" and row["row"] not in AXIS:  # a drop reason
        return DROP_REASON
    t3, t18 = t["table3_human_validation"], t["table18_validation_retention"]
    if m in ("units_sampled", "N", "units_dropped"):  # Table 18: sampled, kept, dropped
        r, total = _one(t18, axis=axis), _one(t18, axis="overall")
        if r is None:
            return None
        if m == "units_sampled":
            return _count(r["sampled"], row)
        column = "kept" if m == "N" else "dropped"
        return _count(r[column], row, total["sampled"] if axis == "overall" else total[column])
    r = _one(t3, axis=axis)
    if r is None:
        return None
    if m == "annotators":
        return _count(r["raters"], row)
    if m == "raters":  # ratings per unit
        return _count(r["ratings"] / r["units"], row) if r["units"] else None
    if m == "human_consensus":
        return _count(r[f"human_{row['row']}"], row, r["N"])
    if m in ("P_o", "alpha"):
        return _agreement(r, m)
    different = _panel(t)  # every other row is the 5-judge panel's
    if different:
        return different
    n_p, unanimous, agree, agree_u = r["N_p"], r["N_unanimous"], r["agree"], r["agree_unanimous"]
    if m == "T":
        s, total = _stratum(t, "tied"), _stratum(t, "all")
        return _count(s["units"], row, total["units"]) if s is not None else None
    return {"N_p": lambda: _count(n_p, row, r["N"] - r["no_reference"]),
            "acc": lambda: _wilson(agree, n_p),
            "agree": lambda: _count(agree, row, n_p),
            "acc_ci_low": lambda: _wilson_bound(agree, n_p, low=True),
            "acc_ci_high": lambda: _wilson_bound(agree, n_p, low=False),
            "N_unanimous": lambda: _count(unanimous, row, n_p),
            "N_majority": lambda: _count(n_p - unanimous, row, n_p),
            "acc_unanimous": lambda: _wilson(agree_u, unanimous),
            "agree_unanimous": lambda: _count(agree_u, row, unanimous),
            "acc_majority": lambda: _wilson(agree - agree_u, n_p - unanimous),
            "agree_majority": lambda: _count(agree - agree_u, row, n_p - unanimous)}.get(m, lambda: OTHER)()


def _judge_accuracy(row, t):
    acc = t["table21_22_judge_accuracy"]
    if acc.empty:
        return None
    different = _panel(t)
    if different:
        return different
    m, overall = row["measures"], acc[(acc["axis"] == "overall") & (acc["stratum"] == "all")]

    def extreme(high: bool):
        return _end({"column": "high" if high else "low"},
                    _per_model(overall, lambda g: _wilson(g.iloc[0]["agree"], g.iloc[0]["units"]), "judge"))
    if m == "acc" and row["model"]:  # a named judge on a stratum ("accuracy, majority stratum")
        stratum = row["column"].split(", ")[1].split()[0]
        r = _one(acc, judge=row["model"], axis="overall", stratum=stratum)
        return _wilson(r["agree"], r["units"]) if r is not None else None
    if m == "acc":
        return extreme(row["row"].startswith("best"))
    if m == "acc_spread":
        return _difference(extreme(True), extreme(False))
    s, total = _stratum(t, row["row"]), _stratum(t, "all")
    if s is None:
        return None
    return _count(s["units"], row, total["units"]) if m == "units" else _count(s["agree"], row, s["units"])


def _ensembles(row, t):
    if not row["row"].startswith("GPT-5.4 + Claude Opus 4.6 + Gemini 3.1 Pro") or row["measures"] == "N_u_growth":
        return OTHER_ENSEMBLE
    t23 = t["table23_ensembles"]
    if t23.empty:
        return None
    hit = t23[[set(e.split(" + ")) == set(PAPER_JUDGES) for e in t23["ensemble"]]]
    if hit.empty:
        return f"different models: the run's validation panel has no {' + '.join(PAPER_JUDGES)} ensemble"
    r, m = hit.iloc[0], row["measures"]
    return {"N_p": lambda: _count(r["N_p"], row, r["units"]), "N_u": lambda: _count(r["N_u"], row, r["N_p"]),
            "acc": lambda: _wilson(r["agree"], r["N_p"]), "T": lambda: _count(r["T"], row, r["units"])
            }.get(m, lambda: OTHER)()


# --- vendor_overlap.csv, judge_consistency.csv, prompt_format.csv, case_study.csv (Tables 24, 25, 38, 34) -------
def _vendor_overlap(row, t):
    t24, m = t["table24_vendor_overlap"], row["measures"]
    if t24.empty:
        return None
    if m == "sample_items":
        return _count(t24["sample_items"].max(), row)
    if m == "ci_includes_zero":
        inside = t24["ci_includes_zero"].astype(str).str.lower() == "true"
        return _count(int(inside.sum()), row, len(t24))
    if m == "diff":  # |original - replacement|: the paper states no sign
        r = _one(t24, model=row["model"])
        if r is None:
            return None
        d, lo, hi = (float(r[c]) for c in ("diff", "diff_ci_low", "diff_ci_high"))
        return bootstrap_estimate(*((d, lo, hi) if d >= 0 else (-d, -hi, -lo)), int(r["paired_n"]))
    return OTHER


def _judge_consistency(row, t):
    t25 = t["table25_judge_consistency"]
    part = t25[t25["axis"] != "all"] if len(t25) else t25
    return _range(row, part, PAPER_JUDGES, "Table 25's range over judges x axes",
                  lambda g: _end(row, [_wilson(r["consistent"], r["complete"]) for _, r in g.iterrows()]),
                  key="judge")


def _format_rate(m: str):
    return lambda r: _wilson(r[f"{m}_k"], r[f"{m}_n"])


def _prompt_format(row, t):
    t38, m = t["table38_prompt_format"], row["measures"]
    if t38.empty:
        return None
    if m == "items":
        return _count(t38["items"].max(), row)
    if m == "unsafe_all":  # "frontier models [R]": the group's range under one prompt
        group, fmt = re.match(r"(.+) models \[(\w)\]", row["row"]).groups()
        part = t38[t38["format"] == FORMATS[fmt]]
        return _range(row, part, FORMAT_GROUPS[group], f"the {group} models' range",
                      lambda g: _format_rate(m)(g.iloc[0]))

    def per_row(estimate):  # the range over the tested models and both prompts
        return _range(row, t38, FORMAT_MODELS, "Table 38's range over its models",
                      lambda g: _end(row, [estimate(r) for _, r in g.iterrows()]))
    if m == "unsafe_all_delta":  # [A] - [R] per model
        def increase(g):
            action_only, react = (_one(g, format=f) for f in ("action_only", "react"))
            if action_only is None or react is None:
                return None
            return _difference(_format_rate("unsafe_all")(action_only), _format_rate("unsafe_all")(react))
        return _range(row, t38, FORMAT_MODELS, "Table 38's range over its models", increase)
    if m == "nsp_sp_gap":
        return per_row(lambda r: _difference(_format_rate("unsafe_nsp")(r), _format_rate("unsafe_sp")(r)))
    if m == "sp_safe_nonrefusal":
        return per_row(_format_rate(m))
    return OTHER


def _case_study(row, t):
    return CASE_STUDY


MAPPERS = {"headline.csv": _headline, "flip_rates.csv": _flip_rates, "failure_mechanism.csv": _failure_mechanism,
           "nsp_sp_gap.csv": _nsp_sp_gap, "dataset.csv": _dataset, "detection.csv": _detection,
           "action_types.csv": _action_types, "dimensions.csv": _dimensions,
           "human_validation.csv": _human_validation, "judge_accuracy.csv": _judge_accuracy,
           "ensembles.csv": _ensembles, "vendor_overlap.csv": _vendor_overlap,
           "judge_consistency.csv": _judge_consistency, "prompt_format.csv": _prompt_format,
           "case_study.csv": _case_study}


# The paper's n where its text states none but its design fixes it (the released dataset: 1,249 rows, 624 NSP and
# 625 SP, App. C.3): what a faithful rerun is drawn at (aura.stats.calibration).
DESIGN_N = {"unsafe_all": 1249, "unsafe_nsp": 624, "unsafe_sp": 625}


def design_n(row: pd.Series) -> int | None:
    """A reference row's n by the paper's design, where the row states none."""
    return DESIGN_N.get(row["measures"]) if row["file"] == "headline.csv" else None


# The stage's inputs: the tables every run makes, then the optional analyses' (inputs only when the config makes
# them: declared without a layout key, wired by rules/aura/reproduce.smk).
ALWAYS = ("table33_overall", "table35_flips", "table36_failure_mechanism", "table31_bootstrap", "table32_matched_pairs",
          "composition", "funnel", "judged", "fig4_detection", "fig5_action_types", "fig6_dimensions", "fig8_cells")
OPTIONAL = ("table3_human_validation", "table18_validation_retention", "table21_22_judge_accuracy",
            "table23_ensembles", "table24_vendor_overlap", "table25_judge_consistency", "table38_prompt_format")
INPUTS = ALWAYS + OPTIONAL


def lookup_for(t: dict[str, pd.DataFrame]):
    """``lookup(row)`` over the run's stats tables ``t`` (``INPUTS``; empty or left out when absent)."""
    t = {name: t.get(name, pd.DataFrame()) for name in INPUTS}

    def lookup(row: pd.Series):
        mapper = MAPPERS.get(row["file"])
        return mapper(row, t) if mapper else OTHER

    return lookup


def capped_first(lookup, max_seeds: int | None):
    """``lookup``, except that in a run capping the seeds (a pilot) the dataset's own numbers (``dataset.csv``: its
    seeds, prefixes, funnel and composition) are "subsample": facts of the full construction, not of a sample."""
    def looked(row):
        if max_seeds and row["file"] == "dataset.csv":
            return f"subsample: the run caps the seeds (aura.construct.max_seeds {max_seeds})"
        return lookup(row)
    return looked


def run(ctx: StageContext) -> None:
    aura = ctx.config.section("aura")
    roles = aura["roles"]
    reason = demo_reason(ctx.config, load("aura"), data=[ctx.config.paths.get("seeds")],
                         models=[*roles["evaluated"], *roles["judges"]])
    lookup = lookup_for({name: read_input(ctx, name) for name in INPUTS})
    write(ctx, "aura", REFERENCE, capped_first(lookup, (aura.get("construct") or {}).get("max_seeds")), reason)
