"""Leave-one-vendor-out replacement analysis (paper §4 and Appendix F.4, Table 24).

The judge panel shares vendors with some evaluated models, so a judge might favour its own family.
For every evaluated model whose `vendor` equals a panel judge's, the replacement judge
(`aura.roles.replacement_judge`, DeepSeek-V4-Pro in the paper) labels the model's rollouts on a common
stratified sample with the original judging setup (action type, then safety given its own action
type). The replacement panel is the original panel with each same-vendor judge's safety vote
swapped for the replacement judge's; the majority rule is the panel's.

Table 24 compares Safe rates on the items whose safety label is resolved (Safe or Unsafe) under
both panels, so the difference is paired: original minus replacement, with a source-seed-clustered
bootstrap 95% percentile interval (same draws and vectorised path as Table 31). Items left out
(rollout not ok, unresolved or unjudged under either panel) are counted in the table.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from aura.io import atomic_write_text, read_jsonl
from aura.pipeline.context import StageContext
from aura.provenance import provenance, write_provenance

from ..evaluate.panel import majority
from ..settings import role_models, vendor_overlaps
from .bootstrap import percentile_ci, resample_sums, safe_rate, sorted_seeds
from .tables import with_models

SAFE = "Safe"
VALID = ("Safe", "Unsafe")


def replacement_votes(panel_row: dict, judges: list[str], replaced: list[str], repl_label: str | None) -> list:
    """The panel's safety votes in panel order, each replaced judge's vote swapped for the replacement's."""
    votes = panel_row.get("safety_votes") or {}
    return [repl_label if j in replaced else votes.get(j) for j in judges]


def paired_labels(panel: list[dict], repl: dict[str, str | None], sample_ids: set[str], judges: list[str],
                  replaced: list[str]) -> pd.DataFrame:
    """One row per sample item of one model: original and replacement safety label.

    `repl` maps item_id -> the replacement judge's safety label (None = unparsed/failed).
    Items whose rollout was not ok keep the panel's `rollout_*` status on both sides.
    """
    rows = []
    for r in panel:
        if r["item_id"] not in sample_ids:
            continue
        if r["rollout_status"] != "ok":
            orig = new = r["safety"]
        else:
            orig = r["safety"]
            new = (majority(replacement_votes(r, judges, replaced, repl.get(r["item_id"])), len(judges))
                   if r["item_id"] in repl else "not_judged")
        rows.append({"item_id": r["item_id"], "original": orig, "replacement": new})
    return pd.DataFrame(rows, columns=["item_id", "original", "replacement"])


def compare(df: pd.DataFrame, n_resamples: int, seed: int) -> dict:
    """Safe rates and their paired difference for one model. `df`: item_id, seed_id, original, replacement."""
    paired = df[df["original"].isin(VALID) & df["replacement"].isin(VALID)]
    n = len(paired)
    orig_safe = int((paired["original"] == SAFE).sum())
    repl_safe = int((paired["replacement"] == SAFE).sum())
    seeds = sorted_seeds(paired["seed_id"])
    lo = hi = float("nan")
    if seeds:
        per_seed = (paired.assign(o=paired["original"] == SAFE, r=paired["replacement"] == SAFE, n=1)
                    .groupby("seed_id")[["o", "r", "n"]].sum())
        units = per_seed.loc[seeds].to_numpy(dtype=float)
        sums = resample_sums(units, n_resamples, np.random.default_rng(seed))
        lo, hi = percentile_ci(safe_rate(sums[:, 0] - sums[:, 1], sums[:, 2]))
    orig_rate, repl_rate = (orig_safe / n, repl_safe / n) if n else (float("nan"), float("nan"))
    return {
        "sample_items": len(df), "paired_n": n, "excluded": len(df) - n,
        "excluded_original": int((~df["original"].isin(VALID)).sum()),
        "excluded_replacement": int((~df["replacement"].isin(VALID)).sum()),
        "labels_changed": int((paired["original"] != paired["replacement"]).sum()),
        "orig_safe": orig_safe, "repl_safe": repl_safe, "orig_safe_rate": orig_rate, "repl_safe_rate": repl_rate,
        "diff": orig_rate - repl_rate, "diff_ci_low": lo, "diff_ci_high": hi, "n_seeds": len(seeds),
        "ci_includes_zero": bool(lo <= 0 <= hi) if seeds else None,
    }


def table24(panels: dict[str, list[dict]], repl_judgments: list[dict], sample: list[dict], judges: list[str],
            replaced: dict[str, list[str]], n_resamples: int, seed: int) -> pd.DataFrame:
    """Table 24 over every model in `replaced` (model -> same-vendor judges)."""
    seed_of = {it["item_id"]: it["seed_id"] for it in sample}
    rows = []
    for model, same in replaced.items():
        repl = {j["item_id"]: (j["label"] if j["status"] == "ok" else None)
                for j in repl_judgments if j["model"] == model and j["axis"] == "safety"}
        df = paired_labels(panels.get(model, []), repl, set(seed_of), judges, same)
        df["seed_id"] = df["item_id"].map(seed_of)
        rows.append({"model": model, "replaced_judges": ",".join(same), **compare(df, n_resamples, seed)})
    return pd.DataFrame(rows)


def run(ctx: StageContext) -> None:
    """Stage vendor-overlap: --in sample=... --in panel_<i>=... --in judgments_<i>=... --out table24=..."""
    replaced = vendor_overlaps(ctx.config.raw)
    panels: dict[str, list[dict]] = {}
    judgments: list[dict] = []
    for name, path in ctx.inputs.items():
        if name.startswith("panel"):
            for r in read_jsonl(path):
                panels.setdefault(r["model"], []).append(r)
        elif name.startswith("judgments"):
            judgments += read_jsonl(path)
    cfg = ctx.config.raw["aura"]["stats"]
    table = table24(panels, judgments, ctx.read("sample"), role_models(ctx.config, "judges"), replaced,
                    cfg["bootstrap_resamples"], cfg["bootstrap_seed"])
    table = with_models(table, ctx.config)
    out = ctx.outputs["table24"]
    write_provenance(out, provenance(ctx.stage, ctx.config, inputs=[str(p) for p in ctx.inputs.values()],
                                     extra={"rows": len(table), "replacement_judge": ctx.config.raw["aura"]["roles"]["replacement_judge"],
                                            "bootstrap_resamples": cfg["bootstrap_resamples"],
                                            "bootstrap_seed": cfg["bootstrap_seed"]}))
    atomic_write_text(out, table.to_csv(index=False))
