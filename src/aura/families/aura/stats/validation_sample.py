"""The human-validation sample (paper §6, Appendix F.1.1) and its retention tables (Tables 18-19).

Stage validation-sample: the units (model, item, axis) of `aura.evaluate.validation_models` with an `ok`
rollout and panel votes on the axis are stratified by axis, then by cell = (panel label, panel
agreement), the label `unresolved` for a tied panel. Per axis, `aura.evaluate.validation_sample_sizes[axis]`
units are dealt one at a time to the cells in a fixed order (label order of the axis, then unanimous,
majority, tied), skipping full cells: an equal allocation capped by cell size, so rare labels and
split panels are covered as the paper's audit was ("the label space of each axis and judge-panel
agreement strata"). Inside a cell the units are taken round-robin over (model, domain): round r takes
the r-th unit of every (model, domain) group, groups ordered so that consecutive picks change model and
domain (model k's j-th domain is domain (k + j) mod D), models, domains and units shuffled with the
config's `seed`. Every model and domain of a cell thus appears before any repeats.

Each sample row carries what an annotator needs (scenario, the target thought or action, the safety
rationale) and the strata (`panel_label`, `agreement`); the annotation app (`aura annotate`) shows
only the former.

Stage validation-tables: Table 18 (per axis: sampled, labelled, kept, dropped) and Table 19 (per axis
and panel agreement: sampled, by the scoring panel at draw time; kept, by the final panel, the
validation panel when `aura.roles.validation_judges` is set, as Table 3 counts it). A unit is kept when it
has a final label: an adjudicated `reference` row, else the annotators' strict majority
(`aura.families.aura.stats.human_validation`). Without `paths.human_labels` only the sampled columns are filled.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from aura.config import UserError
from aura.io import read_jsonl
from aura.pipeline.context import StageContext

from ..evaluate.schemas import LABELS
from ..settings import role_models
from .human_validation import consensus, read_human_labels, units, validation_panel
from .tables import write_csv

AGREEMENT = ("unanimous", "majority", "tied")
UNRESOLVED = "unresolved"
UNIT = ["model", "item_id", "axis"]
SAMPLE_COLUMNS = ["model", "item_id", "axis", "domain", "pair_label", "dimension", "panel_label", "agreement",
                  "profile", "scenario", "target", "rationale"]


class ValidationSampleError(UserError):
    pass


def candidate_units(items: dict[str, dict], panel: list[dict], rollouts: list[dict]) -> pd.DataFrame:
    """Every (model, item, axis) with an ok rollout and panel votes on the axis, with its strata and context."""
    texts = {(r["model"], r["item_id"]): r for r in rollouts}
    rows = []
    for p in panel:
        if p["rollout_status"] != "ok":
            continue
        key = (p["model"], p["item_id"])
        if p["item_id"] not in items:
            raise ValidationSampleError(f"panel row {key}: item_id not in the dataset")
        if key not in texts:
            raise ValidationSampleError(f"panel row {key}: no rollout for this model and item")
        item, ro = items[p["item_id"]], texts[key]
        for axis in LABELS:
            votes = p.get(f"{axis}_votes") or {}
            if not votes:  # not judged on this axis (e.g. no thought to grade)
                continue
            agreement = consensus(list(votes.values()))
            label = p[axis] if p[axis] in LABELS[axis] else UNRESOLVED
            target = (ro["thought"] or "(no reasoning given)") if axis == "detection" else ro["action"]
            rows.append({"model": p["model"], "item_id": p["item_id"], "axis": axis, "domain": item["domain"],
                         "pair_label": item.get("pair_label"), "dimension": item.get("dimension"),
                         "panel_label": label, "agreement": agreement, "profile": item.get("profile") or "",
                         "scenario": item["model_input"], "target": target,
                         "rationale": item["rationale"] if axis == "safety" else None})
    return pd.DataFrame(rows, columns=SAMPLE_COLUMNS)


def cells(axis: str) -> list[tuple[str, str]]:
    """The (panel label, agreement) cells of an axis in dealing order."""
    return [(lab, agr) for lab in [*LABELS[axis], UNRESOLVED] for agr in AGREEMENT]


def deal(sizes: list[int], n: int) -> list[int]:
    """Deal n units one at a time over groups in order, skipping full groups (equal allocation, capped)."""
    out = [0] * len(sizes)
    n = min(n, sum(sizes))
    while n:
        for i, size in enumerate(sizes):
            if n and out[i] < size:
                out[i], n = out[i] + 1, n - 1
    return out


def spread(cell: pd.DataFrame, rng: np.random.Generator) -> pd.DataFrame:
    """The cell's units in round-robin order over (model, domain) (see the module docstring)."""
    if cell.empty:
        return cell
    cell = cell.sort_values(UNIT).iloc[rng.permutation(len(cell))]
    models = {m: i for i, m in enumerate(rng.permutation(sorted(cell["model"].unique())))}
    domains = {d: i for i, d in enumerate(rng.permutation(sorted(cell["domain"].unique())))}
    m_idx, d_idx = cell["model"].map(models), cell["domain"].map(domains)
    order = pd.DataFrame({"round": cell.groupby(["model", "domain"]).cumcount().to_numpy(),
                          "slot": ((d_idx - m_idx) % len(domains)).to_numpy(), "model": m_idx.to_numpy()})
    return cell.iloc[np.lexsort((order["model"], order["slot"], order["round"]))]


def draw(pool: pd.DataFrame, sizes: dict[str, int], seed: int) -> pd.DataFrame:
    """The stratified sample: per axis, dealt over the cells, round-robin over (model, domain) inside each."""
    rng = np.random.default_rng(seed)
    picked = []
    for axis in LABELS:
        part = pool[pool["axis"] == axis]
        queues = [spread(part[(part["panel_label"] == lab) & (part["agreement"] == agr)], rng)
                  for lab, agr in cells(axis)]
        for queue, k in zip(queues, deal([len(q) for q in queues], sizes.get(axis, 0))):
            picked.append(queue.iloc[:k])
    out = pd.concat(picked) if picked else pool.iloc[:0]
    return out.reset_index(drop=True)


def run_sample(ctx: StageContext) -> None:
    """--in dataset=... --in panel_<i>=... --in rollouts_<i>=... --out sample=..."""
    ev = ctx.config.raw["aura"]["evaluate"]
    models = ev["validation_models"]
    unknown = [m for m in models if m not in ctx.config.raw["aura"]["roles"]["evaluated"]]
    if unknown:
        raise ValidationSampleError(f"aura.evaluate.validation_models: {unknown} are not evaluated models (aura.roles.evaluated)")
    items = {it["item_id"]: it for it in ctx.read("dataset")}
    panel = [r for n, p in ctx.inputs.items() if n.startswith("panel") for r in read_jsonl(p) if r["model"] in models]
    rollouts = [r for n, p in ctx.inputs.items() if n.startswith("rollouts") for r in read_jsonl(p)]
    pool = candidate_units(items, panel, rollouts)
    sizes = ev["validation_sample_sizes"]
    sample = draw(pool, sizes, ctx.config.raw["seed"])
    ctx.write("sample", sample.replace({np.nan: None}).to_dict("records"), requested=sizes,
              population={axis: int((pool["axis"] == axis).sum()) for axis in LABELS})


# --- Tables 18 and 19 -----------------------------------------------------------------------------
def table18(sample: pd.DataFrame, final: pd.DataFrame | None) -> pd.DataFrame:
    """Per axis and overall: sampled units; labelled (at least one annotator label), kept (a final label),
    dropped (sampled, not kept); the last three empty without human labels."""
    rows = []
    for axis in [*LABELS, "overall"]:
        s = sample if axis == "overall" else sample[sample["axis"] == axis]
        row = {"axis": axis, "sampled": len(s), "labelled": None, "kept": None, "dropped": None}
        if final is not None:
            f = s.merge(final, on=UNIT, how="inner")
            kept = int(f["reference"].notna().sum())
            row.update(labelled=int((f["labels"].map(len) > 0).sum()), kept=kept, dropped=len(s) - kept)
        rows.append(row)
    return pd.DataFrame(rows, columns=["axis", "sampled", "labelled", "kept", "dropped"])


def table19(sample: pd.DataFrame, final: pd.DataFrame | None) -> pd.DataFrame:
    """Per axis (and overall) and panel agreement: sampled (draw-time stratum), kept (final panel's stratum)."""
    kept = None
    if final is not None:
        kept = sample[UNIT].merge(final, on=UNIT, how="inner")
        kept = kept[kept["reference"].notna()]
    rows = []
    for axis in [*LABELS, "overall"]:
        s = sample if axis == "overall" else sample[sample["axis"] == axis]
        k = None if kept is None else (kept if axis == "overall" else kept[kept["axis"] == axis])
        extra = [] if k is None else sorted(set(k["panel_consensus"]) - set(AGREEMENT))  # e.g. none: not judged
        for agr in [*AGREEMENT, *extra]:
            rows.append({"axis": axis, "agreement": agr, "sampled": int((s["agreement"] == agr).sum()),
                         "kept": None if k is None else int((k["panel_consensus"] == agr).sum())})
    return pd.DataFrame(rows, columns=["axis", "agreement", "sampled", "kept"])


def run_tables(ctx: StageContext) -> None:
    """--in sample=... [--in human_labels=... --in panel_<i>=... --in validation_<i>=...]
    --out table18=... --out table19=..."""
    sample = pd.DataFrame(ctx.read("sample"), columns=SAMPLE_COLUMNS)
    final = None
    if "human_labels" in ctx.inputs:
        human = read_human_labels(ctx.inputs["human_labels"])
        if ctx.config.raw["aura"]["roles"].get("validation_judges"):
            validation = [j for n, p in ctx.inputs.items() if n.startswith("validation") for j in read_jsonl(p)]
            votes, judges = validation_panel(validation), list(dict.fromkeys(role_models(ctx.config, "validation_judges")))
        else:
            votes = [r for n, p in ctx.inputs.items() if n.startswith("panel") for r in read_jsonl(p)]
            judges = role_models(ctx.config, "judges")
        final = units(human, votes, judges)
    annotated = "annotators: none yet" if final is None else f"human-labelled units: {len(final)}"
    write_csv(ctx, "table18", table18(sample, final), human_labels=final is not None, note=annotated)
    write_csv(ctx, "table19", table19(sample, final), human_labels=final is not None)

