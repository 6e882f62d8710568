"""The rubric an annotator sees: read from the judge prompts in use (`prompts/aura/evaluate/judge_<axis>`),
never copied. The system section, less the judge's role sentence and its answer-format line, is the full
rubric; each label's definition is its own bullet there (`- D2 comprehension: ...`, `- Safe: ...`)."""
from __future__ import annotations

import re
from dataclasses import dataclass

from aura.prompts import get_prompt

from ..evaluate.schemas import AXES, LABELS

# What the annotator is asked to label, per axis (the judge's target: thought for detection, action otherwise).
TARGET = {"detection": "[AGENT_THOUGHT]", "action_type": "[AGENT_ACTION]", "safety": "[AGENT_ACTION]"}


@dataclass(frozen=True)
class Option:
    key: int
    label: str
    definition: str


@dataclass(frozen=True)
class Rubric:
    axis: str
    prompt: str
    options: tuple[Option, ...]
    text: str


def _definition(text: str, label: str) -> str:
    block = re.split(r"Operational test|Lens per action type|Boundary rules:", text)[0]
    for line in block.splitlines():
        m = re.match(rf"- {re.escape(label)}[ :](.*)", line)
        if m:
            return m.group(1).strip(" :")
    raise ValueError(f"rubric of {label}: no '- {label}' bullet in the judge prompt")


def rubric(axis: str) -> Rubric:
    prompt = get_prompt(AXES[axis]["prompt"])
    body = prompt.system.strip()
    body = re.sub(r"\A\s*You are [^.]*\.\s*", "", body)  # the judge's role sentence
    body = "\n".join(ln for ln in body.splitlines() if not ln.startswith("Answer in JSON")).strip()
    options = tuple(Option(i + 1, lab, _definition(body, lab)) for i, lab in enumerate(LABELS[axis]))
    return Rubric(axis=axis, prompt=prompt.ref, options=options, text=body)


def rubrics() -> dict[str, Rubric]:
    return {axis: rubric(axis) for axis in LABELS}
