"""Parquet files of the export: a config's columns as Hugging Face features, one split written, one read back.

A split lies at ``<folder>/<config>/<split>.parquet``. `write_split` checks every row against the columns
(a missing key or a value of the wrong kind is one line naming the produced file and the row), turns
``json`` values into JSON text and ``list[image]`` paths into ``{bytes, path}`` structs, and writes the file
with `datasets` (so it carries the features in its metadata). `read_split` and `read_parquet_rows`
need only pyarrow.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from . import Column, ExportError, Split

KINDS = {"string": str, "int64": int, "float64": (int, float), "bool": bool}


def split_path(folder: str | Path, config_name: str, split: str) -> Path:
    return Path(folder) / config_name / f"{split}.parquet"


def features(columns: tuple[Column, ...]):
    """The `datasets.Features` of a config's columns (``json`` columns are strings)."""
    import datasets

    def one(kind: str):
        if kind == "list[string]":
            return datasets.List(datasets.Value("string"))
        if kind == "list[image]":
            return datasets.List(datasets.Image())
        return datasets.Value("string" if kind == "json" else kind)

    return datasets.Features({c.name: one(c.type) for c in columns})


def _cell(column: Column, value: Any, where: str) -> Any:
    if value is None:
        return None
    kind = column.type
    if kind == "json":
        return json.dumps(value, ensure_ascii=False, sort_keys=True)
    if kind in KINDS:
        ok = isinstance(value, KINDS[kind]) and (kind == "bool" or not isinstance(value, bool))
        if not ok:
            raise ExportError(f"{where}: {column.name} is {type(value).__name__} {value!r:.40}, expected {kind}")
        return float(value) if kind == "float64" else value
    if not isinstance(value, list):
        raise ExportError(f"{where}: {column.name} is {type(value).__name__}, expected a list ({kind})")
    if kind == "list[string]":
        bad = [v for v in value if not isinstance(v, str)]
        if bad:
            raise ExportError(f"{where}: {column.name} holds {type(bad[0]).__name__} {bad[0]!r:.40}, expected strings")
        return value
    images = []
    for p in value:  # list[image]: paths of image files
        path = Path(str(p))
        try:
            images.append({"bytes": path.read_bytes(), "path": path.name})
        except OSError as exc:
            raise ExportError(f"{where}: {column.name}: image {path}: {exc.strerror or exc}") from None
    return images


def table_rows(columns: tuple[Column, ...], split: Split) -> list[dict]:
    """The split's rows as the Parquet file stores them, every value checked against its column."""
    out = []
    for n, row in enumerate(split.rows, 1):
        where = f"{split.source}: row {n}"
        missing = [c.name for c in columns if c.name not in row]
        if missing:
            raise ExportError(f"{where}: missing field(s) {', '.join(missing)}")
        out.append({c.name: _cell(c, row[c.name], where) for c in columns})
    return out


def write_split(folder: Path, config_name: str, columns: tuple[Column, ...], split: Split) -> int:
    """Write one split's Parquet file under `folder`; returns the size of its table in bytes (the card's
    ``num_bytes``)."""
    import datasets

    path = split_path(folder, config_name, split.name)
    path.parent.mkdir(parents=True, exist_ok=True)
    datasets.disable_progress_bars()
    ds = datasets.Dataset.from_list(table_rows(columns, split), features=features(columns))
    ds.to_parquet(str(path))
    return int(ds.data.nbytes)


def features_yaml(columns: tuple[Column, ...]) -> list:
    """The card's ``dataset_info.features`` of a config's columns, as `datasets` writes them into a card
    (its public DatasetInfosDict.to_dataset_card_data, what push_to_hub uses; not Features' private YAML
    helper)."""
    import datasets
    from datasets.info import DatasetInfosDict
    from huggingface_hub import DatasetCardData

    card = DatasetCardData()
    DatasetInfosDict({"config": datasets.DatasetInfo(features=features(columns))}).to_dataset_card_data(card)
    return card["dataset_info"]["features"]


def read_parquet_rows(path: str | Path, *, decode_json: bool = True) -> list[dict]:
    """The rows of one Parquet file as dicts (pyarrow: a null stays None, lists stay lists). With
    `decode_json` the ``*_json`` columns come back as the values they encode."""
    import pyarrow.parquet as pq

    rows = pq.read_table(path).to_pylist()
    if decode_json:
        for row in rows:
            for key, value in row.items():
                if key.endswith("_json") and isinstance(value, str):
                    row[key] = json.loads(value)
    return rows


def read_split(folder: str | Path, config_name: str, split: str, *, decode_json: bool = True) -> list[dict]:
    """The rows of one exported split, keyed by the Parquet columns (read_parquet_rows); images come as
    ``{"bytes": ..., "path": ...}`` dicts."""
    path = split_path(folder, config_name, split)
    if not path.is_file():
        raise ExportError(f"{path}: no such split (config {config_name!r}, split {split!r})")
    return read_parquet_rows(path, decode_json=decode_json)
