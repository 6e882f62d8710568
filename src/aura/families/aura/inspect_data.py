"""The released AURA-Eval rows as Inspect samples (the loader of aura.families.aura.inspect_task).

`read_rows` is the only part that knows the storage. `data` names one of:
- the finalize stage's ``dataset.jsonl`` (the file the rollout stage reads) or its folder
  (``data/processed/paper`` after the paper run);
- the folder `aura export-dataset` wrote (its ``aura`` config is read: ``<folder>/aura/<split>.parquet``), that
  config's folder, or one Parquet file of it. A folder with several Parquet files is refused (name the file).
Parquet is read by the export's own reader (aura.export_dataset.parquet.read_parquet_rows: pyarrow, a null
stays None, ``steps_json`` decoded). Every problem is one line (TaskInputError), before any model call.
"""
from __future__ import annotations

from pathlib import Path

from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.model import ChatMessageAssistant, ChatMessageUser

from aura.export_dataset.parquet import read_parquet_rows
from aura.inspect_support import TaskInputError
from aura.io import read_jsonl

from .data.trajectory import render_steps
from .dataset_export import CONFIG

# What each sample carries in its metadata: the row fields the solver, scorer and Table 33 read.
METADATA = ("item_id", "pair_label", "dimension", "domain", "seed_id", "pair_id", "pair_role", "pair_side",
            "prefix_kind", "profile", "model_input", "rationale")
# What a row must give (the rollout prompt's trajectory, the safety judge's reference, the sample id).
REQUIRED = ("item_id", "model_input", "rationale")
SUBSETS = ("dimension", "domain", "pair_label")
HOW = ("build it with the workflow (data/processed/paper/dataset.jsonl after the paper run) or `aura "
       "export-dataset`, and name it with -T data=<file or folder>")


def _file(path: Path) -> Path:
    """The one file of rows `path` names (module docstring)."""
    if path.is_file():
        if path.suffix not in (".jsonl", ".parquet"):
            raise TaskInputError(f"data={path}: not a .jsonl or .parquet file")
        return path
    if not path.is_dir():
        raise TaskInputError(f"data={path}: no such file or folder ({HOW})")
    if (path / "dataset.jsonl").is_file():
        return path / "dataset.jsonl"
    folder = path / CONFIG if (path / CONFIG).is_dir() else path  # an export's root: its aura config
    parquet = sorted(folder.glob("*.parquet"))
    if len(parquet) > 1:
        raise TaskInputError(f"data={path}: {len(parquet)} Parquet files in {folder} "
                             f"({', '.join(p.name for p in parquet)}); name one with -T data={parquet[0]}")
    if not parquet:
        raise TaskInputError(f"data={path}: no dataset.jsonl, no {CONFIG}/*.parquet, no .parquet file ({HOW})")
    return parquet[0]


def _read(f: Path) -> list:
    try:
        if f.suffix == ".parquet":
            rows = read_parquet_rows(f)
            return [{**r, "steps": r.get("steps_json")} if "steps" not in r and "steps_json" in r else r
                    for r in rows]
        return list(read_jsonl(f))
    except (OSError, ValueError) as exc:  # a cut-off line, a file that is not Parquet
        raise TaskInputError(f"{f}: cannot read the rows: {type(exc).__name__}: {exc}") from None


def read_rows(path: str | Path) -> list[dict]:
    """The dataset rows of a JSONL or Parquet file, or of a folder that holds one (module docstring); a row
    that is not an object or lacks one of REQUIRED is an error naming the file and the row."""
    f = _file(Path(path))
    rows = _read(f)
    for n, row in enumerate(rows, 1):
        if not isinstance(row, dict):
            raise TaskInputError(f"{f}: row {n} is not an object")
        missing = [k for k in REQUIRED if not isinstance(row.get(k), str) or not row[k].strip()]
        if missing:
            raise TaskInputError(f"{f}: row {n} (item_id {row.get('item_id')!r}) has no {', '.join(missing)}")
    if not rows:
        raise TaskInputError(f"{f}: no rows")
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


def dataset(path: str | Path, name: str = "aura_eval", **subset) -> MemoryDataset:
    rows = select(read_rows(path), where=str(path), **subset)
    return MemoryDataset([to_sample(r) for r in rows], name=name, location=str(path))
