"""Prompt-format sensitivity (Appendix J.4, Table 38).

Stage format-sample: a reproducible stratified draw of scenarios, balanced between NSP and SP and
proportional over the 12 dimension groups (original, RS1-RS6, SD1-SD5) within each label.
Stage format-stats: Table 33's columns on that sample under the ReAct and the action-only interface.
"""
from __future__ import annotations

import sys

import numpy as np
import pandas as pd

from aura.io import atomic_write_text, read_jsonl
from aura.pipeline.context import StageContext
from aura.provenance import provenance, write_provenance

from ..stats import metrics, tables

LABELS = ("NSP", "SP")


def allocate(sizes: dict[str, int], total: int) -> dict[str, int]:
    """Largest-remainder proportional allocation of `total` over groups, capped by group sizes."""
    total = min(total, sum(sizes.values()))
    out = {g: 0 for g in sizes}
    while sum(out.values()) < total:
        room = {g: sizes[g] - out[g] for g in sizes if sizes[g] > out[g]}
        left = total - sum(out.values())
        weight = sum(sizes[g] for g in room)
        quotas = {g: left * sizes[g] / weight for g in room}
        base = {g: min(room[g], int(q)) for g, q in quotas.items()}
        if sum(base.values()) == 0:  # hand out the remainder by largest fractional part
            for g in sorted(room, key=lambda g: (-(quotas[g] - int(quotas[g])), g))[:left]:
                out[g] += 1
        for g, b in base.items():
            out[g] += b
    return out


def stratified_sample(items: list[dict], size: int, seed: int) -> list[dict]:
    rng = np.random.default_rng(seed)
    by_label = {lab: [it for it in items if it["pair_label"] == lab] for lab in LABELS}
    want = allocate({lab: len(v) for lab, v in by_label.items()}, size) if size < len(items) else {
        lab: len(v) for lab, v in by_label.items()}
    # balanced first: half each when both labels have enough rows
    half = size // 2
    if all(len(v) >= half for v in by_label.values()):
        want = {"NSP": size - half, "SP": half}
    picked = []
    for lab in LABELS:
        groups: dict[str, list[dict]] = {}
        for it in sorted(by_label[lab], key=lambda it: it["item_id"]):
            groups.setdefault(it["dimension"], []).append(it)
        quota = allocate({g: len(v) for g, v in sorted(groups.items())}, want[lab])
        for g in sorted(groups):
            idx = rng.choice(len(groups[g]), size=quota[g], replace=False) if quota[g] else []
            picked += [groups[g][i] for i in sorted(idx)]
    return sorted(picked, key=lambda it: it["item_id"])


def run_sample(ctx: StageContext) -> None:
    # `--option size_key=vendor_overlap_sample_size`: the same draw, sized for the vendor-overlap analysis
    size = ctx.config.raw["aura"]["evaluate"][ctx.options.get("size_key", "format_sample_size")]
    rows = stratified_sample(ctx.read("dataset"), size, ctx.config.raw["seed"])
    ctx.write("sample", rows, requested=size)


# Table 38 ("column definitions follow Table 33"): every Table 33 column, computed by metrics.table33 over the
# sample's rows, per model under each prompt format. Action-only rollouts have no thought, so they carry no
# detection label (the panel writes "not_judged"): their three detection-based columns are not applicable
# (NaN, ``detection_judged`` False) rather than "excluded".
FORMATS = ("react", "action_only")
DETECTION_METRICS = ("nsp_risk_aware", "nsp_aware_unsafe", "nsp_miss_execute")
NOT_ROLLED_OUT = "not_rolled_out"  # a sample item absent from a model's panel
JUDGED = ["detection", "action_type", "safety"]
SAMPLE_COLUMNS = [c for c in metrics.REQUIRED if c not in ("model", *JUDGED)]


def format_table(sample: pd.DataFrame, panels: list[tuple[str, str, pd.DataFrame]]) -> pd.DataFrame:
    """One row per (model, format), in the order given: ``model, format, items`` (sample items), Table 33's
    columns over the sample rows, ``detection_judged``.

    `sample`: the sampled dataset rows. `panels`: (model, format, that model's panel rows). A sample item
    missing from a panel gets ``not_rolled_out`` on every axis (excluded from every rate, counted)."""
    template = metrics.table33(pd.DataFrame(columns=metrics.REQUIRED))
    out = []
    for model, fmt, panel in panels:
        if fmt not in FORMATS:
            raise ValueError(f"format-stats: unknown prompt format {fmt!r}")
        df = sample[SAMPLE_COLUMNS].merge(panel.reindex(columns=["item_id", *JUDGED]), on="item_id", how="left",
                                          validate="one_to_one")
        df[JUDGED] = df[JUDGED].astype(object).where(df[JUDGED].notna(), NOT_ROLLED_OUT)
        df.insert(0, "model", model)
        t33 = metrics.table33(df)
        row = t33.iloc[0].to_dict() if len(t33) else {c: 0 for c in template.columns}
        if fmt == "action_only":
            row.update({f"{name}_{key}": float("nan") for name in DETECTION_METRICS
                        for key in ("k", "n", "rate", "pct", "excluded")})
        out.append({**row, "model": model, "format": fmt, "items": len(df), "detection_judged": fmt == "react"})
    columns = ["model", "format", "items", *template.columns.drop("model"), "detection_judged"]
    return pd.DataFrame(out, columns=columns)


def run_stats(ctx: StageContext) -> None:
    sample = pd.DataFrame(ctx.read("sample")).reindex(columns=SAMPLE_COLUMNS)
    panels = []
    for name, path in sorted(ctx.inputs.items()):
        if not name.startswith(("react_", "action_only_")):
            continue
        fmt = "react" if name.startswith("react_") else "action_only"
        panel = pd.DataFrame(list(read_jsonl(path)))
        model = panel["model"].iloc[0] if len(panel) else ctx.model
        if model is None:
            print(f"format-stats: {path}: empty panel, no model to report", file=sys.stderr)
            continue
        panels.append((model, fmt, panel))
    panels.sort(key=lambda p: (str(p[0]), FORMATS.index(p[1])))  # per model: [R] then [A]
    table = tables.with_models(format_table(sample, panels), ctx.config)
    if table.empty or sample.empty:
        print(f"format-stats: {len(sample)} sample items, {len(panels)} panels: Table 38 has no rates",
              file=sys.stderr)
    out = ctx.outputs["table38"]
    write_provenance(out, provenance(ctx.stage, ctx.config, inputs=[str(p) for p in ctx.inputs.values()],
                                     extra={"rows": len(table)}))
    atomic_write_text(out, table.to_csv(index=False))
