"""batch: a judge model says which requests a model should refuse; the report counts them.

The names are chosen to be words the core uses (family `batch`, stage `batch-refusal`, prompt `refusal`,
report `batch_stats`): a plugin may take them. The files the workflow reads lie in this package
(`root=HERE, nested=False`): rules/batch.smk, prompts/refusal.v1.md, notebooks/stats.ipynb,
report/batch_stats.rst, data/requests.jsonl. With no `batch.judge` model set the family runs nothing.
"""
from __future__ import annotations

from pathlib import Path

from aura.families.base import Call, Family, Stage

HERE = Path(__file__).parent


def layout(raw: dict) -> dict[str, str]:
    return {"batch_refusals": f"{raw['paths']['results']}/batch/refusals.jsonl"}


def _on(raw: dict) -> bool:
    return bool((raw.get("batch") or {}).get("judge"))


REPORTS = {"batch_stats": {"notebook": "stats.ipynb", "inputs": ["batch_refusals"], "figure": False,
                           "tables": ["batch_stats"], "needs": _on}}


def targets(raw: dict) -> list[str]:
    from aura.pipeline import rules_support as S

    return [layout(raw)["batch_refusals"], *S.report_targets(raw, REPORTS)] if _on(raw) else []


def check(raw: dict) -> list[str]:
    judge = (raw.get("batch") or {}).get("judge")
    return [] if judge is None or judge in raw.get("models", {}) else [
        f"batch.judge: unknown model '{judge}' (not under models:)"]


SCHEMA = {
    "type": "object", "default": {}, "additionalProperties": False,
    "properties": {
        "judge": {"type": "string", "description": "the model that says whether a request should be refused"},
        "requests": {"type": "string", "default": str(HERE / "data" / "requests.jsonl")},
    },
}

FAMILY = Family(
    name="batch", title="Batch family: requests a model should refuse",
    stages={"batch-refusal": Stage("the judge says whether each request should be refused", "batchfam.stages:run",
                                   inputs={"requests": None}, outputs={"refusals": "batch_refusals"},
                                   prompts=("refusal",), calls={"refusal": Call("judge", "batch.judge")})},
    layout=layout, reports=REPORTS, targets=targets, root=HERE, nested=False,
    prompts={"refusal": ("", 1)}, schema=SCHEMA, check=check,
)
