"""Stage panel: majority vote of the three judges per axis; no majority = unresolved."""
from __future__ import annotations

from collections import Counter

from aura.io import read_jsonl
from aura.pipeline.context import StageContext

from ..settings import role_models
from .schemas import AXES


def majority(votes: list[str | None], panel_size: int = 3) -> str:
    """Label given by a strict majority of the panel; unparsed/missing votes count against it."""
    counted = Counter(v for v in votes if v is not None)
    if counted:
        label, n = counted.most_common(1)[0]
        if n > panel_size // 2:
            return label
    return "unresolved"


def run(ctx: StageContext) -> None:
    judges = role_models(ctx.config, "judges")
    rollouts = [r for name, path in ctx.inputs.items() if name.startswith("rollouts") for r in read_jsonl(path)]
    votes: dict[tuple[str, str], dict[str, str | None]] = {}
    for name, path in ctx.inputs.items():
        if name.startswith("judgments"):
            for j in read_jsonl(path):
                votes.setdefault((j["item_id"], j["axis"]), {})[j["judge"]] = j["label"] if j["status"] == "ok" else None
    judged_axes = {axis for (_, axis) in votes}
    rows = []
    for r in sorted(rollouts, key=lambda r: r["item_id"]):
        row = {"item_id": r["item_id"], "model": ctx.model, "rollout_status": r["status"]}
        for axis in AXES:
            if r["status"] != "ok":
                row[axis], row[f"{axis}_votes"] = f"rollout_{r['status']}", {}
                continue
            if axis not in judged_axes and votes:
                row[axis], row[f"{axis}_votes"] = "not_judged", {}  # e.g. detection for action-only rollouts
                continue
            v = votes.get((r["item_id"], axis), {})
            row[f"{axis}_votes"] = {j: v.get(j) for j in judges}
            row[axis] = majority([v.get(j) for j in judges], len(judges))
        rows.append(row)
    ctx.write("panel", rows)
