"""Stage composed-stats: unsafe rates of composed mechanisms vs each single mechanism on the same prefixes.

For one evaluated model and one composition AxB (`aura.families.aura.construct.composed`), the unit is a prefix that has
all four cells of the 2x2 design with a resolved Action Safety label (Safe or Unsafe): its original (0),
the single variations A and B, and the composition AB. Prefixes missing a cell (a variation rejected by
the code checks or the reviewers, a failed classification, an unparsed rollout, an unresolved panel label)
are left out and counted (`incomplete_prefixes`), so every rate below has the same denominator n. A
prefix counts as incomplete when at least one of its items reached the experiment's dataset; one whose four
items were all dropped before it is not in that file and is counted by the construction stages instead
(their rejection reasons), not here.

Rates r_c = unsafe_c / n for c in {0, A, B, AB}. The interaction effect is the difference-in-differences

    interaction = (r_AB - r_0) - [(r_A - r_0) + (r_B - r_0)] = r_AB - r_A - r_B + r_0,

the interaction contrast of the 2x2 factorial design on the same prefixes: zero when the two mechanisms'
effects on the unsafe rate add up, positive when together they do more than the sum (super-additive),
negative when less (e.g. both already push the same agents over the edge). It is the primary statistic
because it is a fixed linear contrast of the four cell rates with a clear null (additivity), while
"composition minus the larger single" (`excess_over_max` = r_AB - max(r_A, r_B), also reported) picks its
comparator from the data and is not zero under additivity (it equals the smaller single's own effect
then), so it mixes the interaction with the size of the weaker mechanism. The excess answers a simpler
question, "is the composition worse than its worst part", and is kept as a secondary column, with the
composition minus each single (`composed_minus_first`, `composed_minus_second`).

Confidence intervals: the source-seed-clustered percentile bootstrap of `aura.stats.bootstrap` (variants of
one seed are not independent; both prefixes of a seed and all four cells move together): seeds are drawn
with replacement (`resample_sums`, ``default_rng(42)`` afresh for each model and composition,
`aura.stats.bootstrap_resamples` draws), the per-seed sums of n and the four unsafe counts are added up, and
every statistic is recomputed. Rates are fractions.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from aura.io import atomic_write_text, read_jsonl
from aura.pipeline.context import StageContext
from aura.provenance import provenance, write_provenance

from .bootstrap import SEED, percentile_ci, resample_sums, safe_rate, sorted_seeds

CELLS = ("original", "first", "second", "composed")
STATS = ("interaction", "excess_over_max", "composed_minus_first", "composed_minus_second")
COLUMNS = (["model", "composition", "first", "second", "prefixes", "seeds", "incomplete_prefixes"]
           + [f"{c}_{k}" for c in CELLS for k in ("unsafe", "rate", "ci_low", "ci_high")]
           + [f"{s}{k}" for s in STATS for k in ("", "_ci_low", "_ci_high")]
           + ["n_resamples", "seed"])


def cell_of(dimension: str, first: str, second: str) -> str | None:
    return {"original": "original", first: "first", second: "second", f"{first}x{second}": "composed"}.get(dimension)


def prefix_table(dataset: pd.DataFrame, panel: pd.DataFrame, composition: str) -> pd.DataFrame:
    """One row per prefix in the design of `composition` for each model in `panel`: seed, and the 0/1
    unsafe indicator of each cell (NaN where the cell is missing or has no resolved safety label)."""
    first, second = composition.split("x")
    items = dataset[dataset["compositions"].apply(lambda cs: composition in cs)].copy()
    items["cell"] = items["dimension"].map(lambda d: cell_of(d, first, second))
    items = items[items["cell"].notna()]
    merged = panel.merge(items[["item_id", "seed_id", "prefix_id", "cell"]], on="item_id", how="inner")
    merged["unsafe"] = merged["safety"].map({"Unsafe": 1.0, "Safe": 0.0})  # anything else: NaN
    wide = merged.set_index(["model", "seed_id", "prefix_id", "cell"])["unsafe"].unstack("cell")
    # prefixes of the design that a model has no row for at all still count as incomplete
    design = items[["seed_id", "prefix_id"]].drop_duplicates()
    models = panel["model"].drop_duplicates()
    full = design.merge(models.to_frame(), how="cross").set_index(["model", "seed_id", "prefix_id"])
    return wide.reindex(full.index).reindex(columns=list(CELLS)).reset_index()


def contrasts(rates: np.ndarray) -> tuple[np.ndarray, ...]:
    """The STATS from rates (..., 4) in CELLS order: DiD, excess over the larger single, and the composition
    minus each single."""
    r0, ra, rb, rab = (rates[..., i] for i in range(4))
    return rab - ra - rb + r0, rab - np.maximum(ra, rb), rab - ra, rab - rb


def one(prefixes: pd.DataFrame, n_resamples: int, seed: int = SEED) -> dict:
    """Rates, interaction and clustered CIs for one model's prefix table of one composition."""
    complete = prefixes.dropna(subset=list(CELLS))
    out = {"prefixes": len(complete), "incomplete_prefixes": len(prefixes) - len(complete),
           "n_resamples": n_resamples, "seed": seed}
    seeds = sorted_seeds(complete["seed_id"])
    out["seeds"] = len(seeds)
    # per-seed sums: n, then the unsafe count of each cell
    sums = (complete.assign(n=1.0).groupby("seed_id")[["n", *CELLS]].sum().reindex(seeds).to_numpy(dtype=float)
            if seeds else np.zeros((0, 5)))
    total = sums.sum(axis=0) if seeds else np.zeros(5)
    point = safe_rate(total[1:], total[0])
    point_stats = contrasts(point)
    draws = (resample_sums(sums, n_resamples, np.random.default_rng(seed)) if seeds
             else np.full((0, 5), np.nan))
    boot = safe_rate(draws[:, 1:], draws[:, [0]])
    boot_stats = contrasts(boot)
    for i, c in enumerate(CELLS):
        out[f"{c}_unsafe"] = int(total[1 + i])
        out[f"{c}_rate"] = float(point[i])
        out[f"{c}_ci_low"], out[f"{c}_ci_high"] = percentile_ci(boot[:, i])
    for name, value, samples in zip(STATS, point_stats, boot_stats):
        out[name] = float(value)
        out[f"{name}_ci_low"], out[f"{name}_ci_high"] = percentile_ci(samples)
    return out


def composed_table(dataset: pd.DataFrame, panel: pd.DataFrame, compositions: list[str],
                   n_resamples: int, seed: int = SEED) -> pd.DataFrame:
    """One row per (model, composition); the header only when nothing was evaluated."""
    if dataset.empty or panel.empty:
        return pd.DataFrame(columns=COLUMNS)
    rows = []
    for comp in compositions:
        first, second = comp.split("x")
        table = prefix_table(dataset, panel, comp)
        for model in panel["model"].drop_duplicates():
            part = table[table["model"] == model]
            if part.empty:
                continue
            rows.append({"model": model, "composition": comp, "first": first, "second": second,
                         **one(part, n_resamples, seed)})
    return pd.DataFrame(rows, columns=COLUMNS)


def run(ctx: StageContext) -> None:
    from ..construct.composed import canonical_pairs, composition_label, settings

    compositions = [composition_label(a, b) for a, b in canonical_pairs(settings(ctx.config)["pairs"])]
    panel = pd.DataFrame([r for name, p in ctx.inputs.items() if name.startswith("panel") for r in read_jsonl(p)],
                         columns=["item_id", "model", "safety"])
    dataset = pd.DataFrame(list(read_jsonl(ctx.inputs["dataset"])),
                           columns=["item_id", "seed_id", "prefix_id", "dimension", "compositions"])
    table = composed_table(dataset, panel, compositions, ctx.config.raw["aura"]["stats"]["bootstrap_resamples"])
    table.insert(1, "label", [ctx.config.models[m].display for m in table["model"]])
    table.insert(2, "group", [ctx.config.models[m].group for m in table["model"]])
    out = ctx.outputs["composed_interaction"]
    write_provenance(out, provenance(ctx.stage, ctx.config, inputs=[str(p) for p in ctx.inputs.values()],
                                     extra={"rows": len(table), "compositions": compositions}))
    atomic_write_text(out, table.to_csv(index=False))
