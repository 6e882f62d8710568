"""Stage reproduce: every AURA-Eval number of reference/*.csv beside the run's own, with a verdict.

The core (aura.stats.reproduction) does the verdicts and the paper's own checks; this module maps a reference
row to its reproduced estimate (``lookup``) from the stats files the run produced, one mapper per reference file
(``MAPPERS``: ``reproduction_results`` for the paper's results, ``reproduction_validation`` for its validation and
side analyses; their shared roster, keys and estimate helpers in ``reproduction_support``). A mapper returns an
``Estimate``, None (not produced: the table is absent or empty, e.g. an optional
analysis the config leaves off, or lacks the row) or a reason (not comparable). Conventions:

- a rate k/n: Wilson (``wilson_estimate``, compared by Newcombe's two-proportion interval); a count with an n:
  ``exact_estimate(count, row, n)``, compared as the rate count/n; a count without n or a fact: exact;
- a range over a set of models ("frontier models, low" / "high"): the lowest / highest model's estimate over the
  paper's models of that set only (``PAPER_GROUPS``, config/paper.yaml's roster; the prompt-format models
  ``FORMAT_GROUPS``; the judges ``PAPER_JUDGES`` / ``VALIDATION_JUDGES``): "different models" when the run lacks
  any of them (a range over a subset is another number), the run's other models ignored;
- a pooled rate over a set of models ("frontier models", no low / high): the models' k and n summed, Wilson;
- a difference in points of two rates (a gap, a drop, an increase): the difference with the standard error of two
  independent proportions, sqrt(p1 q1 / n1 + p2 q2 / n2) (``difference_of``; where both rates count the same items it
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

from pathlib import Path

import pandas as pd

from aura.families import load
from aura.pipeline.context import StageContext
from aura.stats.reproduction import demo_reason, read_input, write

from . import reproduction_results, reproduction_validation
from .reproduction_support import OTHER

REFERENCE = Path(__file__).resolve().parents[1] / "reference"
MAPPERS = {**reproduction_results.MAPPERS, **reproduction_validation.MAPPERS}  # reference file -> its mapper


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

