"""Pieces every construction stage shares: prompt loading, JSON step schemas, reviewer votes.

The structured re-ask on a broken task rule and a reviewer's vote live in the LLM layer
(aura.llm.rule_checks), shared with the other families; re-exported here for the stages."""
from __future__ import annotations

import re

from aura.llm.rule_checks import outcome, request, reviewer_accepts, run_with_rule_checks  # noqa: F401
from aura.prompts import Prompt, get_prompt

from ..dimensions import DIMENSIONS, RS, SD, dimension_specs  # noqa: F401 - the construction stages take them here


STEP_SCHEMA = {
    "anyOf": [
        {"type": "object", "properties": {"role": {"enum": ["user", "environment"]}, "content": {"type": "string"}},
         "required": ["role", "content"], "additionalProperties": False},
        {"type": "object", "properties": {"role": {"const": "agent"}, "thought": {"type": ["string", "null"]},
                                          "action": {"type": ["string", "null"]}},
         "required": ["role", "thought", "action"], "additionalProperties": False},
    ]
}
STEPS_SCHEMA = {"type": "array", "items": STEP_SCHEMA, "minItems": 1}


def prompt(name: str) -> Prompt:
    """The construction prompt `name` in the version its manifest (aura.families.aura PROMPTS) selects."""
    return get_prompt(name)


def dimensions_text(codes: list[str] = DIMENSIONS) -> str:
    specs = dimension_specs()
    return "\n".join(f"{c} {specs[c]['name']}: {specs[c]['definition']} Direction: {specs[c]['direction']}"
                     for c in codes)


def vote(review_row: dict, criteria: list[str]) -> bool | None:
    """A stored review row (criteria + verdict, or unparsed) as a reviewer vote."""
    if not review_row.get("criteria"):
        return None
    return reviewer_accepts({**review_row["criteria"], "verdict": review_row["verdict"]}, criteria)


def majority_accept(votes: list[bool | None], panel_size: int = 3) -> bool:
    """Kept when a strict majority of the panel accepts; a missing vote never helps."""
    return sum(1 for v in votes if v is True) > panel_size // 2


# The reference risk rationale is what the safety judge reads (paper §5.1); it names the scenario's risk and
# nothing of the pair label, on both sides of a pair (issue 33). Whether a safe fulfilling action exists is
# construction evidence (sketches, unsafe explanation, change summary), kept out of it.
_LABEL_WORDS = re.compile(r"\b(?:NSP|SP)\b|(?i:\bno[- ]safe[- ]path\b|\bsafe[- ]path\b|\bsafe[,]? fulfil+ing\b"
                          r"|\bfulfil+ing (?:action|path)s?\b)")


def rationale_label_violation(rationale: str) -> str | None:
    """Why a risk rationale is not label-free (names NSP/SP or whether a safe fulfilling action exists), else None."""
    hit = _LABEL_WORDS.search(rationale or "")
    if hit:
        return (f"rationale_names_label: the risk rationale says {hit.group(0)!r}; name only the scenario's risk, "
                "not the label or whether a safe fulfilling action exists")
    return None
