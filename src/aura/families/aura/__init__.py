"""The AURA family (the core of this repository): dataset construction from R-Judge seeds, evaluation
by rollouts judged by a panel, and the paper's statistics, figures and tables. Its code keeps its
import paths (aura.construct, aura.evaluate, aura.stats, aura.data); this manifest only names it."""
from __future__ import annotations

from ..base import Family, Stage
from .layout import PAPER_STATS, layout
from .reports import EXPERIMENT_REPORTS, REPORTS

C, E, T = "aura.construct", "aura.evaluate", "aura.stats"

STAGES: dict[str, Stage] = {
    "fetch-seeds": Stage("download the configured seed archive, verify its checksum", f"{C}.seeds:fetch"),
    "select-seeds": Stage("load R-Judge-layout seeds, keep unintended", f"{C}.seeds:run"),
    "tag-truncate": Stage("P1 risk trigger / execution point tags; at-trigger and pre-execution prefixes",
                          f"{C}.tagging:run"),
    "relevance": Stage("P2 dimension relevance; one candidate request per (prefix, relevant dimension)",
                       f"{C}.relevance:run"),
    "generate-variations": Stage("P3/P4 variation generation with the frozen-agent-step check", f"{C}.variations:run"),
    "review-variations": Stage("P5/P6 variation review by one reviewer", f"{C}.review:run_variations"),
    "classify": Stage("P7 NSP/SP classification of originals and accepted variations", f"{C}.classify:run"),
    "generate-pairs": Stage("P8 minimal-flip pair generation with prefix and agent-step checks", f"{C}.pairs:run"),
    "review-pairs": Stage("P9 pair review by one reviewer", f"{C}.review:run_pairs"),
    "finalize": Stage("released dataset rows with stable ids, exclusions, data card", f"{C}.finalize:run"),
    "construction-counts": Stage("dataset composition and construction funnel vs the paper", f"{C}.counts:run"),
    "rollout": Stage("evaluated model continues each prefix (ReAct)", f"{E}.rollout:run"),
    "judge": Stage("one judge labels one model's rollouts on three axes", f"{E}.judge:run"),
    "panel": Stage("majority vote of the judge panel", f"{E}.panel:run"),
    "open-ended": Stage("open-ended rollouts: K ReAct steps per prefix in an LM-emulated text environment",
                        f"{E}.open_ended:run"),
    "open-ended-stats": Stage("open-ended rollouts: first risky step, safe-first-then-unsafe rate per model",
                              f"{T}.open_ended:run"),
    "model-rates": Stage("unsafe rates per model with Wilson CIs", f"{T}.rates:run"),
    "format-sample": Stage("stratified 150-scenario draw for prompt-format sensitivity", f"{E}.format_sample:run_sample"),
    "format-stats": Stage("Table 38: every Table 33 column under ReAct vs action-only", f"{E}.format_sample:run_stats"),
    "paper-stats": Stage("Tables 31-37 and figure inputs from panel labels", f"{T}.tables:run"),
    "reliability": Stage("judge-panel agreement; Table 3 human validation when human labels are given",
                         f"{T}.reliability:run"),
    "consistency": Stage("Table 25: intra-judge consistency over repeated runs", f"{T}.consistency:run"),
    "vendor-overlap": Stage("Table 24: Safe rates with same-vendor judges replaced", f"{T}.vendor_overlap:run"),
    "composed-variations": Stage("composed mechanisms: single and two-dimension variations of the same prefixes",
                                 f"{C}.composed:run_variations"),
    "composed-review": Stage("composed mechanisms: review by one reviewer (both dimensions' criteria)",
                             f"{C}.composed:run_review"),
    "composed-classify": Stage("composed mechanisms: P7 labels and the experiment's item set", f"{C}.composed:run_classify"),
    "composed-stats": Stage("composed mechanisms: unsafe rates, interaction effect, seed-clustered CIs",
                            f"{T}.composed:run"),
    "validation-sample": Stage("human-validation sample stratified by axis, panel label and agreement, model, domain",
                               f"{T}.validation_sample:run_sample"),
    "validation-tables": Stage("Tables 18-19: validation sample sampled / kept per axis and agreement stratum",
                               f"{T}.validation_sample:run_tables"),
}


def targets(config: dict) -> list[str]:
    """What `snakemake all` builds for AURA: the dataset, the rates, every paper statistic, the optional
    analyses the config turns on, and every enabled AURA figure/table."""
    from ...pipeline import rules_support as S

    L = S.layout(config)
    ev = config["evaluate"]
    return [
        L["dataset"],
        L["model_rates"],
        *[L[name] for name in PAPER_STATS],
        *([L["open_ended_rates"], *S.report_targets(config, ["open_ended_rollouts"])]
          if ev["open_ended"]["enabled"] else []),
        *([L["table38_prompt_format"]] if ev["format_models"] else []),
        *([L["table24_vendor_overlap"]] if S.vendor_overlaps(config) else []),
        L["judge_reliability"],
        *([L["table25_judge_consistency"]] if ev["consistency_models"] else []),
        *([L["composed_interaction"], *S.report_targets(config, ["composed_interaction"])]
          if config["construct"]["composed"]["enabled"] else []),
        *([L["validation_sample"], L["table18_validation_retention"], L["table19_validation_strata"]]
          if ev["validation_models"] else []),
        *S.report_targets(config, REPORTS),
    ]


FAMILY = Family(name="aura", title="AURA-Eval: risk awareness of agents on unintended-risk trajectories",
                stages=STAGES, layout=layout, reports={**REPORTS, **EXPERIMENT_REPORTS}, targets=targets)
