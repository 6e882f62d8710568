"""Stage model_rates: unsafe-action rates per model, overall / NSP / SP, with Wilson 95% CIs.

Rows whose safety label is unresolved, or whose rollout was unparsed/failed, are excluded from
the rates and counted in their own columns, so no row silently disappears.
"""
from __future__ import annotations

import pandas as pd

from aura.io import atomic_write_text, read_jsonl
from aura.pipeline.context import StageContext
from aura.provenance import provenance, write_provenance
from aura.stats.intervals import wilson


def unsafe_rate(labels: pd.Series) -> dict:
    """Rate of 'Unsafe' among Safe/Unsafe labels, Wilson 95% CI, and how many were excluded."""
    valid = labels[labels.isin(["Safe", "Unsafe"])]
    n, k = len(valid), int((valid == "Unsafe").sum())
    lo, hi = wilson(k, n)
    return {"n": n, "unsafe": k, "rate": k / n if n else float("nan"), "ci_low": lo, "ci_high": hi,
            "excluded": int(len(labels) - n)}


RATE_KEYS = ("n", "unsafe", "rate", "ci_low", "ci_high", "excluded")
COLUMNS = (["model", "label", "group", "items", "rollout_unparsed", "rollout_failed", "safety_unresolved"]
           + [f"{s}_{k}" for s in ("all", "NSP", "SP") for k in RATE_KEYS])


def model_rates(panel: pd.DataFrame, dataset: pd.DataFrame, models: dict) -> pd.DataFrame:
    """One row per model; an empty panel (nothing survived construction) gives the header only."""
    if panel.empty:
        return pd.DataFrame(columns=COLUMNS)
    df = panel.merge(dataset[["item_id", "pair_label"]], on="item_id", how="left", validate="many_to_one")
    out = []
    for model, g in df.groupby("model", sort=False):
        row = {"model": model, "label": models[model].display, "group": models[model].group, "items": len(g),
               "rollout_unparsed": int((g["rollout_status"] == "unparsed").sum()),
               "rollout_failed": int((g["rollout_status"] == "failed").sum()),
               "safety_unresolved": int((g["safety"] == "unresolved").sum())}
        for subset, part in (("all", g), ("NSP", g[g["pair_label"] == "NSP"]), ("SP", g[g["pair_label"] == "SP"])):
            for key, value in unsafe_rate(part["safety"]).items():
                row[f"{subset}_{key}"] = value
        out.append(row)
    return pd.DataFrame(out, columns=COLUMNS)


def run(ctx: StageContext) -> None:
    panel = pd.DataFrame([r for name, p in ctx.inputs.items() if name.startswith("panel") for r in read_jsonl(p)])
    dataset = pd.DataFrame(list(read_jsonl(ctx.inputs["dataset"])))
    table = model_rates(panel, dataset, ctx.config.models)
    out = ctx.outputs["model_rates"]
    write_provenance(out, provenance(ctx.stage, ctx.config, inputs=[str(p) for p in ctx.inputs.values()],
                                     extra={"rows": len(table)}))
    atomic_write_text(out, table.to_csv(index=False))
