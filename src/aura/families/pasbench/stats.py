"""Stage pasbench-stats: every PaSBench table and figure input as a CSV under {results}/pasbench/stats/.

Inputs (``--in``): ``items`` (items.jsonl; or a list ``items_0, items_1, ...``, e.g. upstream + constructed
items, read as one) and per-model lists ``judgments_0, judgments_1, ...``; the probe outputs
``knowledge_*``, ``reactive_*``, ``verified_*`` are optional. Outputs (``--out``): rates, k_curves,
k_curve_left_out, pearson_models, pearson_samples, word_length, image_count, severity (required), and
knowledge, reactive, propose_verify (each written when asked for; header-only when its probe gave no input).
Definitions: the ``metrics`` module.

Samples: the K curves (k_curves, k_curve_left_out) use every judged sample of a model, up to its
``pasbench.samples_by_model`` N; every other table reads samples 0..``pasbench.samples``-1 only, so a model
run to 128 for Figure 7 still has Best-/Worst-of-16 in Figures 3/4 and Table 2 over its 16 (the same samples
a run at 16 makes).

Every input row is checked before anything is computed (a malformed one stops the stage with one line
naming the file and record), every table is computed before any is written, and each CSV is written
atomically with its provenance. No judged row, one model, or every sample not applicable gives well-formed
tables (header-only or NaN rates with the reason in ``note``), never a crash.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

from aura.config import UserError
from aura.io import read_jsonl
from aura.pipeline.context import StageContext
from aura.stats.tables import write_csv

from . import metrics as M

REQUIRED = ("rates", "k_curves", "k_curve_left_out", "pearson_models", "pearson_samples", "word_length",
            "image_count", "severity")
PROBE_OUTPUTS = ("knowledge", "reactive", "propose_verify")  # the probes' tables: when their probe is on
OUTPUTS = (*REQUIRED, *PROBE_OUTPUTS)
BOOL_OR_NULL = (True, False, None)


class PasStatsError(UserError):
    """A malformed input record: one line naming the file and the record."""


def _read(path: Path) -> list[dict]:
    try:
        return list(read_jsonl(path))
    except (OSError, ValueError) as exc:
        raise PasStatsError(f"{path}: cannot read: {' '.join(str(exc).split())}") from None


def _check_rows(path: Path, rows: list[dict], required: tuple[str, ...], checks: dict) -> None:
    """Each row has the required keys, and each checked key one of its allowed values."""
    for i, row in enumerate(rows):
        where = f"{path}: record {i + 1} (item {row.get('item_id')!r})" if isinstance(row, dict) else \
            f"{path}: record {i + 1}"
        if not isinstance(row, dict):
            raise PasStatsError(f"{where}: not a JSON object")
        missing = [k for k in required if k not in row]
        if missing:
            raise PasStatsError(f"{where}: missing field(s) {missing}")
        for key, allowed in checks.items():
            value = row.get(key)
            if not any(value is a or (value == a and type(value) is type(a)) for a in allowed):
                raise PasStatsError(f"{where}: {key} = {value!r}, expected one of {list(allowed)}")


def read_judgments(path: Path) -> list[dict]:
    rows = _read(path)
    _check_rows(path, rows, M.JUDGMENT_COLUMNS, {"status": M.STATUSES, "detected": BOOL_OR_NULL,
                                                   "modality": M.MODALITIES})
    for i, r in enumerate(rows):
        if r["status"] == "ok" and r["detected"] is None:
            raise PasStatsError(f"{path}: record {i + 1} (item {r['item_id']!r}): status ok without a detected verdict")
    return rows


def _names(ctx: StageContext, prefix: str) -> list[str]:
    """Input names ``prefix`` or ``prefix_<i>``, in input order."""
    return [n for n in ctx.inputs if n == prefix or (n.startswith(prefix + "_") and n[len(prefix) + 1:].isdigit())]


def read_many(ctx: StageContext, prefix: str, reader) -> pd.DataFrame:
    """The rows of every input named ``prefix`` or ``prefix_<i>``, in input order, as one frame."""
    frames = [pd.DataFrame(reader(ctx.inputs[n])) for n in _names(ctx, prefix)]
    frames = [f for f in frames if len(f)]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def _knowledge_reader(path: Path) -> list[dict]:
    """Knowledge-probe rows (probes.run_knowledge): an outcome of M.KNOWLEDGE_OUTCOMES and the A/B/C answer it
    implies (a row of the old true/false probe has no `outcome`: one line naming the file, rerun the stage)."""
    rows = _read(path)
    _check_rows(path, rows, ("item_id", "model", "status", "outcome", "answer"),
                {"outcome": M.KNOWLEDGE_OUTCOMES, "answer": (*M.KNOWLEDGE_ANSWERS, None)})
    implied = {"a_correct": "A", "a_wrong_explanation": "A", "judge_unparsed": "A", "b": "B", "c_not_sure": "C"}
    for i, r in enumerate(rows):
        if r["outcome"] in implied and r["answer"] != implied[r["outcome"]]:
            raise PasStatsError(f"{path}: record {i + 1} (item {r['item_id']!r}): outcome {r['outcome']} "
                                f"with answer {r['answer']!r}, expected {implied[r['outcome']]!r}")
    return rows


def _reactive_reader(path: Path) -> list[dict]:
    rows = _read(path)
    _check_rows(path, rows, ("item_id", "model", "status", "detected"), {"detected": BOOL_OR_NULL})
    return rows


def _verified_reader(path: Path) -> list[dict]:
    rows = _read(path)
    _check_rows(path, rows, ("item_id", "model", "sample", "proposed", "verified", "status"),
                {"proposed": (True, False), "verified": BOOL_OR_NULL})
    return rows


def _no_duplicates(df: pd.DataFrame, keys: list[str], what: str) -> None:
    if len(df) and df.duplicated(keys).any():
        first = df.loc[df.duplicated(keys), keys].iloc[0].to_dict()
        raise PasStatsError(f"{what}: the same {'/'.join(keys)} twice, e.g. {first}")


def read_items(ctx: StageContext, names: list[str]) -> pd.DataFrame:
    rows = []
    for name in names:
        part = _read(ctx.inputs[name])
        _check_rows(ctx.inputs[name], part, ("item_id", "modality"), {"modality": M.MODALITIES})
        rows += part
    items = pd.DataFrame(rows).reindex(columns=["item_id", "modality", "safety_knowledge", "words", "n_images",
                                                "severity"]) if rows else \
        pd.DataFrame(columns=["item_id", "modality", "safety_knowledge", "words", "n_images", "severity"])
    _no_duplicates(items, ["item_id"], "items")
    return items


def image_metadata_points(items_files: list) -> tuple[set | None, str]:
    """The image set's knowledge points read from its metadata alone (the upstream image file's records, no
    image needed): for an items file whose provenance names the data ``folder`` and the checksum of its
    image file, that file's ``safety_knowledge`` values, when its checksum still matches. (None, why) when no
    items file names one. Figure 5 then draws the paper's 128 points when the images are absent."""
    import json

    from aura.io import sha256_file

    from .data import IMAGE_FILE
    why = "no items file names the image metadata"
    for path in items_files:
        try:
            prov = json.loads(Path(f"{path}.prov.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        want = (prov.get("files") or {}).get(IMAGE_FILE) if isinstance(prov, dict) else None
        if not want or not prov.get("folder"):
            continue
        meta = Path(prov["folder"]) / IMAGE_FILE
        if not meta.is_file() or sha256_file(meta) != want:
            why = f"{meta}: missing or changed since the items were read"
            continue
        try:
            recs = json.loads(meta.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise PasStatsError(f"{meta}: cannot read: {' '.join(str(exc).split())}") from None
        recs = recs if isinstance(recs, list) else []
        return {r["safety_knowledge"] for r in recs if isinstance(r, dict) and r.get("safety_knowledge")}, str(meta)
    return None, why


def first_samples(rows: pd.DataFrame, samples: int | None) -> pd.DataFrame:
    """The rows of samples 0..samples-1 (``pasbench.samples``; None = every row). A row without a sample
    number (a reactive row standing for its item) is kept."""
    if samples is None or rows.empty or "sample" not in rows.columns:
        return rows
    return rows[~(pd.to_numeric(rows["sample"], errors="coerce") >= samples)]


def figure7(raw: dict) -> set | None:
    """The curves the paper's Figure 7 draws: the models the config runs beyond N on the image set
    (``pasbench.samples_by_model``: the paper config's Gemini-2.5-pro and GPT-4.1-nano), on the image set;
    None (every image curve) when no model has an image entry there."""
    by_model = ((raw.get("pasbench") or {}).get("samples_by_model") or {})
    pairs = {(m, "image") for m, v in by_model.items() if isinstance(v, dict) and v.get("image")}
    return pairs or None


def compute(items: pd.DataFrame, judgments: pd.DataFrame, knowledge: pd.DataFrame, reactive: pd.DataFrame,
            verified: pd.DataFrame, n_resamples: int, seed: int, samples: int | None = None,
            figure: set | None = None, image_points: set | None = None) -> dict[str, pd.DataFrame]:
    """Every table. ``samples`` (pasbench.samples): the K curves count every run, every other table the first
    ``samples`` of each item only (None: all). ``figure``: Figure 7's curves (:func:`figure7`);
    ``image_points``: the image set's knowledge points from its metadata (:func:`image_metadata_points`)."""
    curve_judgments = judgments
    curve_counts = M.item_counts(judgments)
    judgments, reactive, verified = (first_samples(x, samples) for x in (judgments, reactive, verified))
    counts = M.item_counts(judgments)
    try:
        M.with_items(curve_counts, items)
    except ValueError as exc:
        raise PasStatsError(f"judgments: {exc}") from None
    rates = M.rates(counts, n_resamples, seed)
    try:
        tables = {
            "rates": rates,
            "k_curves": M.k_curves(curve_counts, n_resamples, seed, curve_judgments, figure),
            "k_curve_left_out": M.k_curve_left_out(curve_counts),
            "knowledge": M.knowledge(knowledge, items, counts, image_points),
            "reactive": M.reactive(reactive, items, counts),
            "pearson_models": M.pearson_models(rates),
            "pearson_samples": M.pearson_samples(counts, items),
            "word_length": M.word_length(counts, items, n_resamples, seed),
            "image_count": M.image_count(counts, items, n_resamples, seed),
            "severity": M.severity(counts, items, n_resamples, seed),
            "propose_verify": M.propose_verify(verified, judgments, items, rates),
        }
    except ValueError as exc:
        raise PasStatsError(" ".join(str(exc).split())) from None
    return tables


def run(ctx: StageContext) -> None:
    cfg = (ctx.config.raw.get("pasbench") or {}).get("bootstrap") or {}
    n_resamples, seed = int(cfg.get("resamples", M.N_RESAMPLES)), int(cfg.get("seed", M.SEED))
    unknown = sorted(set(ctx.outputs) - set(OUTPUTS))
    if unknown:
        raise UserError(f"unknown --out name(s) {unknown}; this stage writes {list(OUTPUTS)}")
    outputs = [name for name in REQUIRED if ctx.outputs[name]]  # a missing --out stops here, before any work
    outputs += [name for name in PROBE_OUTPUTS if name in ctx.outputs]
    items = read_items(ctx, _names(ctx, "items") or ["items"])
    judgments = read_many(ctx, "judgments", read_judgments)
    _no_duplicates(judgments, ["model", "item_id", "sample"], "judgments")
    verified = read_many(ctx, "verified", _verified_reader)
    _no_duplicates(verified, ["model", "item_id", "sample"], "verified")
    samples = (ctx.config.raw.get("pasbench") or {}).get("samples")
    items_files = [ctx.inputs[n] for n in _names(ctx, "items") or ["items"]]
    image_points = None
    if not (items["modality"] == "image").any():  # images absent: Figure 5's points from the image metadata
        image_points, where = image_metadata_points(items_files)
        print(f"pasbench-stats: no image item; Figure 5's image points "
              f"{f'from {where} ({len(image_points)})' if image_points else f'unknown: {where}'}", file=sys.stderr)
    tables = compute(items, judgments, read_many(ctx, "knowledge", _knowledge_reader),
                     read_many(ctx, "reactive", _reactive_reader), verified, n_resamples, seed,
                     samples=None if samples is None else int(samples), figure=figure7(ctx.config.raw),
                     image_points=image_points)
    if judgments.empty:
        print("pasbench-stats: no judgment row: every table is empty", file=sys.stderr)
    # whether the image set was loaded (the image figures read it from each CSV's provenance)
    from .data import image_set_state
    image_set = image_set_state(items_files, int((items["modality"] == "image").sum()))
    for name in outputs:
        write_csv(ctx, name, tables[name], n_resamples=n_resamples, seed=seed, image_set=image_set)
