"""What every family's Inspect task reads: its rows of the exported dataset (`aura export-dataset`), one reader.

``-T data=`` names one of:
- the folder `aura export-dataset` wrote: the family's configs' ``<folder>/<config>/<split>.parquet`` are read
  (every one present: PaSBench has a text and an image config);
- one config's folder (``<folder>/<split>.parquet``) or one Parquet file of the export;
- a Hugging Face Hub dataset id (``owner/name``, when no such local path exists): each of the family's configs
  that the dataset has, through ``datasets.load_dataset(id, name=<config>, split=<split>)``;
- the workflow's own file of the family (``ExportSpec.workflow_file``: AURA's ``dataset.jsonl``, PaSBench's
  ``items.jsonl``, LPS-Bench's ``cases.jsonl``) or its folder.
Parquet is read by the export's own reader (aura.export_dataset.parquet.read_parquet_rows: pyarrow, a null stays
None, ``*_json`` columns decoded). A family gives only its ExportSpec and maps each row to a Sample. A file that
is not the family's (a Parquet file of another family: its columns are not the family's; a binary file as
JSONL), a folder without the family's split, an unknown Hub id: one line (TaskInputError), before any call.
"""
from __future__ import annotations

import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

from .inspect_support import TaskInputError
from .io import read_jsonl

HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")
HOW = "an `aura export-dataset` folder, one of its Parquet files, a Hugging Face dataset id"


@dataclass(frozen=True)
class ExportSpec:
    """A family's part of the export: its configs, each with the columns that tell its rows (a Parquet file
    lacking them is another family's), and the workflow's file the task reads as well."""
    family: str
    configs: dict[str, tuple[str, ...]]
    workflow_file: str | None = None


@dataclass(frozen=True)
class Part:
    """Rows of one file (or Hub config): where they came from, their export config (None: the workflow's
    JSONL file) and the rows as dicts."""
    source: str
    config: str | None
    rows: list[dict]


def _config_of(path: Path, columns: set[str], spec: ExportSpec) -> str:
    """The family's config whose columns a Parquet file has (its folder's name first); else one line."""
    named = [path.parent.name] if path.parent.name in spec.configs else []
    for config in [*named, *spec.configs]:
        if set(spec.configs[config]) <= columns:
            return config
    need = sorted(set(next(iter(spec.configs.values()))) - columns)
    raise TaskInputError(f"{path}: not a split of {spec.family}'s export configs ({', '.join(spec.configs)}): "
                         f"no column {', '.join(need)}")


def _parquet(path: Path, spec: ExportSpec) -> Part:
    import pyarrow.parquet as pq

    from .export_dataset.parquet import read_parquet_rows

    try:
        columns = set(pq.read_schema(path).names)
        config = _config_of(path, columns, spec)
        return Part(str(path), config, read_parquet_rows(path))
    except TaskInputError:
        raise
    except (OSError, ValueError) as exc:  # not Parquet, cut off, a column's JSON text broken
        raise TaskInputError(f"{path}: cannot read it as Parquet: {type(exc).__name__}: {exc}") from None


def _jsonl(path: Path, spec: ExportSpec) -> Part:
    try:
        return Part(str(path), None, list(read_jsonl(path)))
    except (OSError, ValueError) as exc:  # UnicodeDecodeError (a binary file) is a ValueError
        raise TaskInputError(f"{path}: cannot read it as {spec.workflow_file or 'JSONL'} (one JSON object a "
                             f"line): {type(exc).__name__}: {str(exc)[:200]}") from None


def export_files(folder: Path, spec: ExportSpec, split: str) -> list[Path]:
    """The family's Parquet files of `split` in an export folder or in one config's folder."""
    found = [folder / config / f"{split}.parquet" for config in spec.configs]
    return [f for f in found if f.is_file()] or [f for f in [folder / f"{split}.parquet"] if f.is_file()]


def _hub(data: str, spec: ExportSpec, split: str) -> list[Part]:
    """Each of the family's configs that the Hub dataset `data` has, its split written to Parquet by `datasets`
    and read back by the export's reader (the same rows as a local export's)."""
    import datasets

    datasets.disable_progress_bars()
    parts, why = [], []
    with tempfile.TemporaryDirectory(prefix="aura-hub-") as tmp:
        for config in spec.configs:
            try:
                ds = datasets.load_dataset(data, name=config, split=split)
            except Exception as exc:  # noqa: BLE001 - no such dataset, config or split; offline: one line
                why.append(f"{config}: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:300])
                continue
            path = Path(tmp) / config / f"{split}.parquet"
            path.parent.mkdir(parents=True)
            ds.to_parquet(str(path))
            part = _parquet(path, spec)
            parts.append(Part(f"{data} ({config}, {split})", part.config, part.rows))
    if not parts:
        raise TaskInputError(f"data={data}: no such file or folder, and no {spec.family} config of a Hugging Face "
                             f"dataset of that id ({'; '.join(why)})")
    return parts


def read_export(data: str | Path, spec: ExportSpec, split: str = "test") -> list[Part]:
    """The family's rows that `data` names (module docstring), one Part per file read."""
    path = Path(data)
    if path.is_file():
        if path.suffix == ".parquet":
            return [_parquet(path, spec)]
        if path.suffix == ".jsonl" and spec.workflow_file:
            return [_jsonl(path, spec)]
        also = f" or the workflow's {spec.workflow_file}" if spec.workflow_file else ""
        raise TaskInputError(f"data={path}: not a .parquet file of the export{also}")
    if path.is_dir():
        if files := export_files(path, spec, split):
            return [_parquet(f, spec) for f in files]
        if spec.workflow_file and (path / spec.workflow_file).is_file():
            return [_jsonl(path / spec.workflow_file, spec)]
        wanted = " or ".join([*(f"{c}/{split}.parquet" for c in spec.configs), f"{split}.parquet",
                              *([spec.workflow_file] if spec.workflow_file else [])])
        raise TaskInputError(f"data={path}: no {wanted} there ({spec.family}'s split {split!r}; -T data= takes {HOW})")
    if HUB_ID.fullmatch(str(data)) and not str(data).startswith((".", "/")):
        return _hub(str(data), spec, split)
    raise TaskInputError(f"data={data}: no such file or folder (-T data= takes {HOW})")
