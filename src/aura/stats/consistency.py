"""Intra-judge consistency (paper Appendix F.5, Table 25).

Each panel judge labels the same rollouts `evaluate.consistency_runs` times with the same prompt
and parameters: run 0 is the main judging, runs 1.. are independent repeats (`judge --option
run=k`, a new call each time because the run index enters the cache key). A unit is one
(evaluated model, item) of the consistency sample with an ok rollout. Per judge and axis, the
consistency is the share of units on which every run returned the same label; units where some
run gave no label (unparsed or failed) are left out and counted (`incomplete`).
"""
from __future__ import annotations

import pandas as pd

from ..evaluate.schemas import AXES
from ..io import atomic_write_text, read_jsonl
from ..pipeline.context import StageContext
from ..provenance import provenance, write_provenance
from .tables import with_models


def consistency(judgments: list[dict], sample_ids: set[str], runs: int) -> pd.DataFrame:
    """Table 25 rows: judge x axis (and each judge over all axes)."""
    labels: dict[tuple, dict[int, str | None]] = {}
    for j in judgments:
        if j["item_id"] in sample_ids:
            key = (j["judge"], j["axis"], j["model"], j["item_id"])
            labels.setdefault(key, {})[int(j.get("run", 0))] = j["label"] if j["status"] == "ok" else None
    rows = []
    for judge in sorted({k[0] for k in labels}):
        per_axis = []
        for axis in AXES:
            units = [v for k, v in labels.items() if k[0] == judge and k[1] == axis]
            complete = [v for v in units if all(v.get(r) is not None for r in range(runs))]
            same = sum(len({v[r] for r in range(runs)}) == 1 for v in complete)
            per_axis.append({"judge": judge, "axis": axis, "runs": runs, "units": len(units), "complete": len(complete),
                             "incomplete": len(units) - len(complete), "consistent": same,
                             "consistency": same / len(complete) if complete else float("nan")})
        n, k = sum(r["complete"] for r in per_axis), sum(r["consistent"] for r in per_axis)
        rows += per_axis + [{"judge": judge, "axis": "all", "runs": runs, "units": sum(r["units"] for r in per_axis),
                             "complete": n, "incomplete": sum(r["incomplete"] for r in per_axis), "consistent": k,
                             "consistency": k / n if n else float("nan")}]
    return pd.DataFrame(rows, columns=["judge", "axis", "runs", "units", "complete", "incomplete", "consistent",
                                       "consistency"])


def run(ctx: StageContext) -> None:
    """Stage consistency: --in sample=... --in judgments_<i>=... (all runs) --out table25=..."""
    sample_ids = {r["item_id"] for r in ctx.read("sample")}
    judgments = [j for name, p in ctx.inputs.items() if name.startswith("judgments") for j in read_jsonl(p)]
    runs = ctx.config.raw["evaluate"]["consistency_runs"]
    table = consistency(judgments, sample_ids, runs)
    table = with_models(table, ctx.config, column="judge")
    out = ctx.outputs["table25"]
    write_provenance(out, provenance(ctx.stage, ctx.config, inputs=[str(p) for p in ctx.inputs.values()],
                                     extra={"rows": len(table), "runs": runs}))
    atomic_write_text(out, table.to_csv(index=False))
