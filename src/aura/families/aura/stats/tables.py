"""Stage paper-stats: merge panel labels with the dataset into one judged table, then compute every
table and figure input of the paper's results (§7, Appendix I, J) as CSVs. Notebooks only render.

Each CSV carries the model's display label and group (frontier / open-weight / safety-tuned /
local) so every table and figure can show the group marks.
"""
from __future__ import annotations

import sys

import pandas as pd

from aura.io import read_jsonl
from aura.pipeline.context import StageContext
from aura.stats.tables import write_csv

from . import bootstrap, flips, metrics, pairs

GROUP_MARK = {"frontier": "★", "open-weight": "○", "safety-tuned": "◇", "local": "·"}
DATASET_COLUMNS = ["item_id", "seed_id", "pair_label", "dimension", "prefix_kind", "pair_id", "pair_role",
                   "pair_side", "domain"]


def judged_table(panel: pd.DataFrame, dataset: pd.DataFrame) -> pd.DataFrame:
    """One row per (model, item) with its three panel labels and the item's construction metadata."""
    df = panel[["model", "item_id", "rollout_status", "detection", "action_type", "safety"]].merge(
        dataset[DATASET_COLUMNS], on="item_id", how="left", validate="many_to_one")
    missing = df["seed_id"].isna()
    if missing.any():
        raise ValueError(f"panel rows whose item_id is not in the dataset: {df.loc[missing, 'item_id'].head(5).tolist()}")
    return df


def with_models(table: pd.DataFrame, config, column: str = "model") -> pd.DataFrame:
    """Display label, group and group mark of the model named in `column`, after the first column."""
    if column not in table.columns:
        return table
    models = config.models
    out = table.copy()
    out.insert(1, "label", [models[m].display if m in models else m for m in out[column]])
    out.insert(2, "group", [models[m].group if m in models else "" for m in out[column]])
    out.insert(3, "mark", [GROUP_MARK.get(g, "") for g in out["group"]])
    return out


def case_study(df: pd.DataFrame, seed_id: str | None) -> pd.DataFrame:
    """Table 34: one scenario across models, every variant of it (original, RS5, ...), panel labels.

    Without a configured seed: the seed with an RS5 variation and the most rows (ties: smallest id).
    """
    if seed_id is None and not df.empty:
        rows = df.groupby("seed_id").agg(n=("item_id", "size"), rs5=("dimension", lambda d: (d == "RS5").any()))
        rows = rows.reset_index().sort_values(["rs5", "n", "seed_id"], ascending=[False, False, True])
        seed_id = rows["seed_id"].iloc[0]
    part = df[df["seed_id"] == seed_id]
    cols = ["model", "seed_id", "item_id", "prefix_kind", "dimension", "pair_label", "pair_role", "rollout_status",
            "detection", "action_type", "safety"]
    return part[cols].sort_values(["dimension", "prefix_kind", "pair_role", "model"], na_position="first")


def compute(df: pd.DataFrame, n_resamples: int, seed: int, case_seed: str | None = None) -> dict[str, pd.DataFrame]:
    return {
        "table34_case_study": case_study(df, case_seed),
        "judged": df,
        "table31_bootstrap": bootstrap.table31(df, n_resamples=n_resamples, seed=seed),
        "table32_matched_pairs": pairs.matched_pairs(df, n_resamples=n_resamples, seed=seed),
        "table33_overall": metrics.table33(df),
        "table35_flips": flips.flip_rates(df, pooled=True),
        "table36_failure_mechanism": flips.failure_mechanism(df, pooled=True),
        "table37_top_combinations": metrics.top_unsafe_combinations(df, k=3),
        "fig4_detection": metrics.unsafe_by_detection(df),
        "fig5_action_types": metrics.action_type_distribution(df),
        "fig6_dimensions": metrics.unsafe_by_dimension(df),
        "fig8_cells": metrics.detection_action_cells(df, pair_label="NSP"),
    }


PANEL_COLUMNS = ["model", "item_id", "rollout_status", "detection", "action_type", "safety"]


def run(ctx: StageContext) -> None:
    panel = pd.DataFrame([r for name, p in ctx.inputs.items() if name.startswith("panel") for r in read_jsonl(p)])
    dataset = pd.DataFrame(list(read_jsonl(ctx.inputs["dataset"])))
    # no item survived construction / no rollout: every table is written empty, with its columns
    panel = panel if len(panel) else pd.DataFrame(columns=PANEL_COLUMNS)
    dataset = dataset if len(dataset) else pd.DataFrame(columns=DATASET_COLUMNS)
    df = judged_table(panel, dataset)
    if df.empty:
        print("paper-stats: no judged row (empty dataset or panel): every table is empty", file=sys.stderr)
    cfg = ctx.config.raw["aura"]["stats"]
    for name, table in compute(df, cfg["bootstrap_resamples"], cfg["bootstrap_seed"], cfg["case_study_seed"]).items():
        write_csv(ctx, name, with_models(table, ctx.config), **cfg)
