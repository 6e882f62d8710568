"""The AURA reproduce stage's shared pieces (``reproduction``): the paper's roster and judges, the reference rows'
keys into the run's tables, the reasons of the rows not mapped, and the small estimate helpers every mapper uses
(a rate k/n, a count, a range's end over the paper's models, a difference of rates, a pooled rate)."""
from __future__ import annotations

import math

import pandas as pd

from aura.stats.reproduction import UNMAPPED
from aura.stats.verdict import Z95, Estimate, binomial_se, exact_estimate, wilson_estimate

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


# --- estimate helpers --------------------------------------------------------------------------------------------------
def is_missing(x) -> bool:
    return x is None or (not isinstance(x, str) and pd.isna(x))


def wilson_of(k, n):
    """k/n, Wilson; None when either is missing or n is 0."""
    if is_missing(k) or is_missing(n) or not n:
        return None
    return wilson_estimate(int(k), int(n))


def count_of(value, row, n=None):
    """A count (``exact_estimate``), with its n when there is one (then compared as the rate count/n); None when
    the count is missing or its n is 0 (no rate: nothing it could be a part of)."""
    if is_missing(value) or (n is not None and not is_missing(n) and not n):
        return None
    return exact_estimate(value, row, None if is_missing(n) else int(n))


def first_row(frame: pd.DataFrame, **match):
    """The first row of ``frame`` matching every column = value; None when there is none."""
    hit = frame
    for k, v in match.items():
        if not len(hit) or k not in hit:
            return None
        hit = hit[hit[k] == v]
    return hit.iloc[0] if len(hit) else None


def is_high(row) -> bool:
    return row["column"].endswith(("high", "highest"))


def range_end(row, estimates):
    """A range's end: the lowest ("..., low") or highest ("..., high") of ``estimates``; None when there is none."""
    found = [e for e in estimates if isinstance(e, Estimate) and not math.isnan(e.value)]
    if not found:
        return None
    return (max if is_high(row) else min)(found, key=lambda e: e.value)


def paper_rows(frame: pd.DataFrame, models, what: str, key: str = "model"):
    """``frame``'s rows of ``models`` (the paper's): None when the run produced no table, "different models" when
    it lacks any of them (a range or pool over a subset is another number)."""
    if frame.empty:
        return None
    present = set(frame[key]) if key in frame else set()
    lacking = [m for m in models if m not in present]
    if lacking:
        return f"different models: {what} is over the paper's {len(models)} models; the run lacks {', '.join(lacking)}"
    return frame[frame[key].isin(models)]


def per_model(part: pd.DataFrame, estimate, key: str = "model") -> list:
    """``estimate(rows of one model)`` for every model of ``part``."""
    return [estimate(g) for _, g in part.groupby(key, sort=False)]


def range_over(row, frame, models, what, estimate, key="model"):
    """A range's end over the paper's ``models`` (see ``paper_rows``), ``estimate`` per model's rows."""
    part = paper_rows(frame, models, what, key)
    return part if part is None or isinstance(part, str) else range_end(row, per_model(part, estimate, key))


def rate_se(e: Estimate) -> float:
    """A rate's binomial standard error (``aura.stats.verdict.binomial_se``)."""
    return binomial_se(e.value, e.n)


def difference_of(a, b):
    """a - b of two rates, in percent, with the standard error of two independent proportions (conservative when
    they count the same items); n is the smaller side's. None when either is missing."""
    if not (isinstance(a, Estimate) and isinstance(b, Estimate)) or not a.n or not b.n:
        return None
    d, se = a.value - b.value, math.hypot(rate_se(a), rate_se(b))
    return Estimate(100 * d, 100 * (d - Z95 * se), 100 * (d + Z95 * se), min(a.n, b.n), "percent",
                    "difference of rates", se=100 * se)


def pooled(part: pd.DataFrame, k: str, n: str):
    """The rows' k and n summed, Wilson."""
    return wilson_of(part[k].sum(), part[n].sum()) if len(part) else None


def paper_group(name: str) -> tuple[str, ...]:
    """A reference row's model set: "frontier models", "open-weight models", ..., "models" (all 20)."""
    name = name.strip()
    return PAPER_EVALUATED if name == "models" else PAPER_GROUPS[name.removesuffix(" models")]
