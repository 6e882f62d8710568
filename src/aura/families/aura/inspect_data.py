"""The released AURA-Eval rows as Inspect samples (the loader of aura.families.aura.inspect_task).

`read_rows` is the only part that knows the storage: today the finalize stage's ``dataset.jsonl`` (the file
the rollout stage reads), given as the file or its folder; a ``.parquet`` file or a folder holding one is
read with pandas, for the exported release. Everything after it works on the row dicts.
"""
from __future__ import annotations

import json
from pathlib import Path

from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.model import ChatMessageAssistant, ChatMessageUser

from aura.io import read_jsonl

from .data.trajectory import render_steps

# What each sample carries in its metadata: the row fields the solver, scorer and Table 33 read.
METADATA = ("item_id", "pair_label", "dimension", "domain", "seed_id", "pair_id", "pair_role", "pair_side",
            "prefix_kind", "profile", "model_input", "rationale")


def _file(path: Path) -> Path:
    if path.is_file():
        return path
    for name in ("dataset.jsonl", "dataset.parquet"):
        if (path / name).is_file():
            return path / name
    parquet = sorted(path.glob("*.parquet")) if path.is_dir() else []
    if parquet:
        return parquet[0]
    raise FileNotFoundError(f"{path}: no dataset.jsonl or .parquet file (run the workflow's finalize stage, "
                            f"or name the folder with -T data=...)")


def read_rows(path: str | Path) -> list[dict]:
    """The dataset rows of a JSONL or Parquet file, or of the folder that holds one."""
    f = _file(Path(path))
    if f.suffix == ".parquet":
        import pandas as pd

        return [_from_parquet({k: (v.tolist() if hasattr(v, "tolist") else v) for k, v in row.items()})
                for row in pd.read_parquet(f).to_dict(orient="records")]
    return list(read_jsonl(f))


def _from_parquet(row: dict) -> dict:
    """`aura export-dataset` keeps the structured steps as JSON text (``steps_json``)."""
    if "steps" not in row and isinstance(row.get("steps_json"), str):
        row = {**row, "steps": json.loads(row["steps_json"])}
    return row


def _wanted(value) -> set[str] | None:
    """A subset option: None (all), one value, a comma-separated string or a list."""
    if value is None or value == "":
        return None
    values = value.split(",") if isinstance(value, str) else list(value)
    return {str(v).strip() for v in values}


def select(rows: list[dict], *, dimension=None, domain=None, pair_label=None, limit: int | None = None) -> list[dict]:
    """The rows in the subset (each filter None = all), in item_id order, the first `limit` of them."""
    keep = {"dimension": _wanted(dimension), "domain": _wanted(domain), "pair_label": _wanted(pair_label)}
    out = [r for r in sorted(rows, key=lambda r: r["item_id"])
           if all(want is None or str(r.get(key)) in want for key, want in keep.items())]
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
    rows = select(read_rows(path), **subset)
    return MemoryDataset([to_sample(r) for r in rows], name=name, location=str(path))
