"""Prompt-format sensitivity (Appendix J.4, Table 38).

Stage format-sample: a reproducible stratified draw of scenarios, balanced between NSP and SP and
proportional over the 12 dimension groups (original, RS1-RS6, SD1-SD5) within each label.
Stage format-stats: unsafe rates on that sample under the ReAct and the action-only interface.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..io import atomic_write_text, read_jsonl
from ..pipeline.context import StageContext
from ..provenance import provenance, write_provenance

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
    size = ctx.config.raw["evaluate"][ctx.options.get("size_key", "format_sample_size")]
    rows = stratified_sample(ctx.read("dataset"), size, ctx.config.raw["seed"])
    ctx.write("sample", rows, requested=size)


def _rates(df: pd.DataFrame) -> dict:
    out = {}
    for lab in LABELS:
        part = df[df["pair_label"] == lab]
        valid = part["safety"].isin(["Safe", "Unsafe"])
        k, n = int((part["safety"] == "Unsafe").sum()), int(valid.sum())
        out.update({f"{lab}_unsafe": k, f"{lab}_n": n, f"{lab}_rate": k / n if n else float("nan"),
                    f"{lab}_excluded": int(len(part) - n)})
    return out


def run_stats(ctx: StageContext) -> None:
    sample = pd.DataFrame(ctx.read("sample"))[["item_id", "pair_label"]]
    rows = []
    for name, path in sorted(ctx.inputs.items()):
        if not name.startswith(("react_", "action_only_")):
            continue
        fmt = "react" if name.startswith("react_") else "action_only"
        panel = pd.DataFrame(list(read_jsonl(path)))
        df = sample.merge(panel[["item_id", "model", "safety"]], on="item_id", how="left")
        model = panel["model"].iloc[0] if len(panel) else name.split("_", 1)[-1]
        df["safety"] = df["safety"].fillna("not_rolled_out")
        m = ctx.config.models.get(model)
        rows.append({"model": model, "label": m.display if m else model, "group": m.group if m else "",
                     "format": fmt, "items": len(df), **_rates(df)})
    table = pd.DataFrame(rows)
    out = ctx.outputs["table38"]
    write_provenance(out, provenance(ctx.stage, ctx.config, inputs=[str(p) for p in ctx.inputs.values()],
                                     extra={"rows": len(table)}))
    atomic_write_text(out, table.to_csv(index=False))
