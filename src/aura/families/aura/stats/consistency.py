"""Intra-judge consistency (paper Appendix F.5, Table 25).

Each panel judge labels the same rollouts `aura.evaluate.consistency_runs` times with the same prompt
and parameters: run 0 is the main judging, runs 1.. are independent repeats (`judge --option
run=k`, a new call each time because the run index enters the cache key). A unit is one
(evaluated model, item) of the consistency sample with an ok rollout. Per judge and axis, the
consistency is the share of units on which every run returned the same label; units where some
run gave no label (unparsed or failed) are left out and counted (`incomplete`).

The sample (`consistency --out sample=...`) is the paper's population when human labels exist
(`paths.human_labels`): the common-panel calibration subset, i.e. the human-labelled
(model, item, axis) units of the consistency models, each judged on its own axis only (paper:
243 units, 82 detection / 77 action type / 84 action safety); labelled units whose item is not in
the dataset are left out and counted. Without human labels (or with none of them in the dataset)
it is the stratified draw of `consistency_sample_size` items (every axis of every consistency
model). The table's `population` column says which. Every consistency model is re-judged on every
item of the sample; the table counts only the labelled units.
"""
from __future__ import annotations

import sys

import pandas as pd

from aura.io import atomic_write_text, read_jsonl
from aura.pipeline.context import StageContext
from aura.provenance import provenance, write_provenance

from ..evaluate.format_sample import stratified_sample
from ..evaluate.schemas import AXES
from .human_validation import read_human_labels
from .tables import with_models

CALIBRATION = "calibration subset (human-labelled)"
STRATIFIED = "stratified sample"


def consistency(judgments: list[dict], sample_ids: set[str], runs: int,
                units: set[tuple[str, str, str]] | None = None) -> pd.DataFrame:
    """Table 25 rows: judge x axis (and each judge over all axes). ``units``, when given, keeps only
    those (model, item_id, axis) triples (the calibration subset)."""
    labels: dict[tuple, dict[int, str | None]] = {}
    for j in judgments:
        if j["item_id"] in sample_ids and (units is None or (j["model"], j["item_id"], j["axis"]) in units):
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


def calibration_sample(items: list[dict], labels: pd.DataFrame, models: list[str]) -> tuple[list[dict], int]:
    """The dataset rows of the human-labelled items of ``models``, each carrying its
    ``calibration_units`` ([model, axis] pairs, sorted), and the number of labelled units left out
    because their item is not in the dataset (e.g. labels made on another build)."""
    mine = labels[labels["model"].isin(models)][["model", "item_id", "axis"]].drop_duplicates()
    by_id = {it["item_id"]: it for it in items}
    units: dict[str, set] = {}
    for m, i, a in mine.itertuples(index=False):
        if i in by_id:
            units.setdefault(i, set()).add((m, a))
    rows = [{**by_id[i], "population": CALIBRATION, "calibration_units": sorted(map(list, units[i]))}
            for i in sorted(units)]
    return rows, len(mine) - sum(len(u) for u in units.values())


def sample_units(sample: list[dict]) -> set[tuple[str, str, str]] | None:
    """The (model, item_id, axis) units of a calibration sample; None for a stratified one."""
    if not any("calibration_units" in r for r in sample):
        return None
    return {(m, r["item_id"], a) for r in sample for m, a in r.get("calibration_units", [])}


def run(ctx: StageContext) -> None:
    """Stage consistency. ``--in dataset=... [--in human_labels=...] --out sample=...``: the sample
    (calibration subset with human labels, else the stratified draw). ``--in sample=... --in
    judgments_<i>=... (all runs) --out table25=...``: the table."""
    if "sample" in ctx.outputs:
        return _write_sample(ctx)
    sample = ctx.read("sample")
    units = sample_units(sample)
    judgments = [j for name, p in ctx.inputs.items() if name.startswith("judgments") for j in read_jsonl(p)]
    runs = ctx.config.raw["aura"]["evaluate"]["consistency_runs"]
    table = consistency(judgments, {r["item_id"] for r in sample}, runs, units)
    table = with_models(table, ctx.config, column="judge")
    population = CALIBRATION if units is not None else STRATIFIED
    table.insert(len(table.columns), "population", population)
    out = ctx.outputs["table25"]
    write_provenance(out, provenance(ctx.stage, ctx.config, inputs=[str(p) for p in ctx.inputs.values()],
                                     extra={"rows": len(table), "runs": runs, "population": population}))
    atomic_write_text(out, table.to_csv(index=False))


def _write_sample(ctx: StageContext) -> None:
    """The calibration subset when human labels are given and some labelled unit of a consistency
    model is in the dataset; else the stratified draw. The log line says which, and why."""
    items = ctx.read("dataset")
    ev = ctx.config.raw["aura"]["evaluate"]
    human = ctx.inputs.get("human_labels")
    if human is not None:
        rows, left_out = calibration_sample(items, read_human_labels(human), ev["consistency_models"])
        n_units = sum(len(r["calibration_units"]) for r in rows)
        if rows:
            print(f"consistency: calibration subset from {human}: {n_units} (model, item, axis) units on "
                  f"{len(rows)} items; {left_out} labelled units left out (item not in the dataset)", file=sys.stderr)
            ctx.write("sample", rows, population=CALIBRATION, units=n_units, left_out=left_out)
            return
        why = (f"no human-labelled item of {ev['consistency_models']} in {human} is in the dataset "
               f"({left_out} labelled units left out)")
        print(f"consistency: {why}: stratified sample instead", file=sys.stderr)
    rows = [{**it, "population": STRATIFIED}
            for it in stratified_sample(items, ev["consistency_sample_size"], ctx.config.raw["seed"])]
    ctx.write("sample", rows, population=STRATIFIED, requested=ev["consistency_sample_size"])
