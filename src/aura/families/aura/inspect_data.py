"""The released AURA-Eval rows as Inspect samples (the loader of aura.families.aura.inspect_task).

The rows come from the core's export reader (aura.inspect_dataset: `-T data=` an `aura export-dataset` folder,
its ``aura`` config's folder or Parquet file, a Hugging Face dataset id, or the finalize stage's
``dataset.jsonl`` (the file the rollout stage reads) or its folder, ``data/processed/paper`` after the paper
run); this module checks each row and maps it to a Sample. Every problem is one line (TaskInputError), before
any model call.
"""
from __future__ import annotations

from pathlib import Path

from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.model import ChatMessageAssistant, ChatMessageUser

from aura.inspect_dataset import ExportSpec, read_export
from aura.inspect_support import TaskInputError

from .data.trajectory import render_steps
from .dataset_export import CONFIG, SPLIT

# What each sample carries in its metadata: the row fields the solver, scorer and Table 33 read.
METADATA = ("item_id", "pair_label", "dimension", "domain", "seed_id", "pair_id", "pair_role", "pair_side",
            "prefix_kind", "profile", "model_input", "rationale")
# What a row must give (the rollout prompt's trajectory, the safety judge's reference, the sample id).
REQUIRED = ("item_id", "model_input", "rationale")
SUBSETS = ("dimension", "domain", "pair_label")
SPEC = ExportSpec("aura", {CONFIG: REQUIRED}, workflow_file="dataset.jsonl")


def read_rows(path: str | Path, split: str = SPLIT) -> list[dict]:
    """The dataset rows `path` names (module docstring), ``steps`` decoded from an export's ``steps_json``; a
    row that is not an object or lacks one of REQUIRED is an error naming the file and the row."""
    rows = []
    for part in read_export(path, SPEC, split):
        for n, row in enumerate(part.rows, 1):
            if not isinstance(row, dict):
                raise TaskInputError(f"{part.source}: row {n} is not an object")
            missing = [k for k in REQUIRED if not isinstance(row.get(k), str) or not row[k].strip()]
            if missing:
                raise TaskInputError(f"{part.source}: row {n} (item_id {row.get('item_id')!r}) has no "
                                     f"{', '.join(missing)}")
            rows.append({**row, "steps": row.get("steps_json")} if "steps" not in row and "steps_json" in row
                        else row)
        if not part.rows:
            raise TaskInputError(f"{part.source}: no rows")
    return rows


def _wanted(value) -> set[str] | None:
    """A subset option: None (all), one value, a comma-separated string or a list."""
    if value is None or value == "":
        return None
    values = value.split(",") if isinstance(value, str) else list(value)
    return {str(v).strip() for v in values}


def select(rows: list[dict], *, dimension=None, domain=None, pair_label=None, limit: int | None = None,
           where: str = "the dataset") -> list[dict]:
    """The rows in the subset (each filter None = all), in item_id order, the first `limit` of them. A
    subset that selects nothing is an error naming the values the rows have."""
    keep = {"dimension": _wanted(dimension), "domain": _wanted(domain), "pair_label": _wanted(pair_label)}
    out = [r for r in sorted(rows, key=lambda r: r["item_id"])
           if all(want is None or str(r.get(key)) in want for key, want in keep.items())]
    if not out:
        asked = {k: w for k, w in keep.items() if w is not None}
        said = ", ".join(f"{k}={','.join(sorted(w))}" for k, w in asked.items())
        have = "; ".join(f"{k}: {', '.join(sorted({str(r.get(k)) for r in rows}))}" for k in asked)
        raise TaskInputError(f"{said} selects no row of {where} ({len(rows)} rows; values there: {have})")
    return out[:limit] if limit else out


def conversation(row: dict) -> list:
    """The prefix as chat messages, one per step: the agent's steps as assistant turns, the user's and the
    environment's as user turns, each in the tagged text of the rollout prompt."""
    steps = row.get("steps") or []
    if not steps:
        return [ChatMessageUser(content=row["model_input"])]
    return [(ChatMessageAssistant if s["role"] == "agent" else ChatMessageUser)(content=render_steps([s]) or "(empty)")
            for s in steps]


def to_sample(row: dict) -> Sample:
    return Sample(id=row["item_id"], input=conversation(row), target=row.get("rationale") or "",
                  metadata={key: row.get(key) for key in METADATA})


def dataset(path: str | Path, name: str = "aura_eval", split: str = SPLIT, **subset) -> MemoryDataset:
    rows = select(read_rows(path, split), where=str(path), **subset)
    return MemoryDataset([to_sample(r) for r in rows], name=name, location=str(path))
