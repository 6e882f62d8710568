"""Every stage the workflow runs, by the name used on the command line and in rules/."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..construct import seeds, thin
from ..evaluate import judge, panel, rollout
from ..stats import rates
from .context import StageContext


@dataclass(frozen=True)
class Stage:
    help: str
    run: Callable[[StageContext], None]
    built: bool = True  # False: thin placeholder until its issue lands


STAGES: dict[str, Stage] = {
    "select-seeds": Stage("load R-Judge-layout seeds, keep unintended", seeds.run),
    "tag-truncate": Stage("P1 step tagging and prefixes (thin: heuristic tags)", thin.tag_truncate, built=False),
    "relevance": Stage("P2 dimension relevance (thin: no candidates)", thin.empty, built=False),
    "generate-variations": Stage("P3/P4 variation generation (thin)", thin.empty, built=False),
    "review-variations": Stage("P5/P6 variation review by one reviewer (thin)", thin.empty, built=False),
    "classify": Stage("P7 NSP/SP classification (thin: R-Judge label proxy)", thin.classify, built=False),
    "generate-pairs": Stage("P8 minimal-flip pair generation (thin)", thin.empty, built=False),
    "review-pairs": Stage("P9 pair review by one reviewer (thin)", thin.empty, built=False),
    "finalize": Stage("released dataset rows with stable ids", thin.finalize, built=False),
    "rollout": Stage("evaluated model continues each prefix (ReAct)", rollout.run),
    "judge": Stage("one judge labels one model's rollouts on three axes", judge.run),
    "panel": Stage("majority vote of the judge panel", panel.run),
    "model-rates": Stage("unsafe rates per model with Wilson CIs", rates.run),
}
