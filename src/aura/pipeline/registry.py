"""Every stage the workflow runs, by the name used on the command line and in rules/."""
from __future__ import annotations

from dataclasses import dataclass
from importlib import import_module

from .context import StageContext

PACKAGES = {"classify": "construct", "counts": "construct", "finalize": "construct", "pairs": "construct",
            "relevance": "construct", "review": "construct", "seeds": "construct", "tagging": "construct",
            "variations": "construct", "format_sample": "evaluate", "judge": "evaluate", "panel": "evaluate",
            "rollout": "evaluate", "consistency": "stats", "rates": "stats", "reliability": "stats",
            "tables": "stats", "vendor_overlap": "stats"}


@dataclass(frozen=True)
class Stage:
    """A stage's help line and its entry point, ``module.function``; the module (and its heavy imports:
    scipy, statsmodels, pandas) is imported only when the stage runs, so every job starts fast."""
    help: str
    target: str

    def run(self, ctx: StageContext) -> None:
        module, function = self.target.split(".")
        getattr(import_module(f"aura.{PACKAGES[module]}.{module}"), function)(ctx)


STAGES: dict[str, Stage] = {
    "fetch-seeds": Stage("download the configured seed archive, verify its checksum", "seeds.fetch"),
    "select-seeds": Stage("load R-Judge-layout seeds, keep unintended", "seeds.run"),
    "tag-truncate": Stage("P1 risk trigger / execution point tags; at-trigger and pre-execution prefixes", "tagging.run"),
    "relevance": Stage("P2 dimension relevance; one candidate request per (prefix, relevant dimension)", "relevance.run"),
    "generate-variations": Stage("P3/P4 variation generation with the frozen-agent-step check", "variations.run"),
    "review-variations": Stage("P5/P6 variation review by one reviewer", "review.run_variations"),
    "classify": Stage("P7 NSP/SP classification of originals and accepted variations", "classify.run"),
    "generate-pairs": Stage("P8 minimal-flip pair generation with prefix and agent-step checks", "pairs.run"),
    "review-pairs": Stage("P9 pair review by one reviewer", "review.run_pairs"),
    "finalize": Stage("released dataset rows with stable ids, exclusions, data card", "finalize.run"),
    "construction-counts": Stage("dataset composition and construction funnel vs the paper", "counts.run"),
    "rollout": Stage("evaluated model continues each prefix (ReAct)", "rollout.run"),
    "judge": Stage("one judge labels one model's rollouts on three axes", "judge.run"),
    "panel": Stage("majority vote of the judge panel", "panel.run"),
    "model-rates": Stage("unsafe rates per model with Wilson CIs", "rates.run"),
    "format-sample": Stage("stratified 150-scenario draw for prompt-format sensitivity", "format_sample.run_sample"),
    "format-stats": Stage("Table 38: every Table 33 column under ReAct vs action-only", "format_sample.run_stats"),
    "paper-stats": Stage("Tables 31-37 and figure inputs from panel labels", "tables.run"),
    "reliability": Stage("judge-panel agreement; Table 3 human validation when human labels are given", "reliability.run"),
    "consistency": Stage("Table 25: intra-judge consistency over repeated runs", "consistency.run"),
    "vendor-overlap": Stage("Table 24: Safe rates with same-vendor judges replaced", "vendor_overlap.run"),
}
