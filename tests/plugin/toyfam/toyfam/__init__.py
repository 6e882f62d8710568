"""toyfam: one question per item, one model answers yes or no; the report counts the answers.

Everything the family brings is in this package: the manifest (below), the stage (`stages.py`), the
estimate hook, the viewer part, and the files the workflow reads, found relative to this folder
(`root=HERE, nested=False`): rules/toyfam.smk, prompts/toyfam_answer.v1.md,
notebooks/answers.ipynb, report/toyfam_answers.rst, data/items.jsonl.
"""
from __future__ import annotations

from pathlib import Path

from aura.families.base import Call, Family, Stage

HERE = Path(__file__).parent


def layout(raw: dict) -> dict[str, str]:
    r = raw["paths"]["results"]
    return {"toyfam_answers": f"{r}/toyfam/answers.jsonl"}


def _on(raw: dict) -> bool:
    return bool((raw.get("toyfam") or {}).get("model"))


REPORTS = {"toyfam_answers": {"notebook": "answers.ipynb", "inputs": ["toyfam_answers"], "figure": False,
                              "tables": ["toyfam_answers"], "needs": _on}}


def targets(raw: dict) -> list[str]:
    from aura.pipeline import rules_support as S

    return [layout(raw)["toyfam_answers"], *S.report_targets(raw, REPORTS)]


def check(raw: dict) -> list[str]:
    model = (raw.get("toyfam") or {}).get("model")
    return [] if model in raw.get("models", {}) else [f"toyfam.model: unknown model '{model}' (not under models:)"]


SCHEMA = {
    "type": "object", "default": {}, "additionalProperties": False,
    "properties": {
        "model": {"type": "string", "description": "the model that answers"},
        "items": {"type": "string", "default": str(HERE / "data" / "items.jsonl")},
    },
}

FAMILY = Family(
    name="toyfam", title="Toy family: yes/no questions",
    stages={"toyfam-answer": Stage("the model answers every item's question", "toyfam.stages:run_answer",
                                   inputs={"questions": None}, outputs={"answers": "toyfam_answers"},
                                   prompts=("toyfam_answer",), calls={"answer": Call("judge", "toyfam.model")})},
    layout=layout, reports=REPORTS, targets=targets, root=HERE, nested=False,
    prompts={"toyfam_answer": ("", 1)}, schema=SCHEMA, check=check,
    estimate="toyfam.stages:estimate", viewer="toyfam.stages:Part",
)
