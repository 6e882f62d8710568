"""The Croissant JSON-LD record of an export (``croissant.json``), built with mlcroissant's classes.

One FileObject per Parquet file (relative path, sha256) and one RecordSet per (config, split), named
``<config>-<split>``, with one Field per column reading that column (``list[...]`` columns are repeated
fields; images read the struct's ``bytes``). The record always has a `url` (see command.dataset_url) and
the Responsible-AI fields of mlcroissant's Metadata (``rai:dataCollection``, ``rai:dataUseCases``,
``rai:dataLimitations``, ``rai:dataBiases``, ``rai:personalSensitiveInformation``), from the families'
CardText (`rai_fields`). `check` loads the written record with mlcroissant and turns any error it reports
into one line.
"""
from __future__ import annotations

import json
from pathlib import Path

from ..io import sha256_file
from . import ExportError, Release, Subset
from .card import short_title

LICENSE_URLS = {"mit": "https://opensource.org/licenses/MIT",
                "cc-by-4.0": "https://creativecommons.org/licenses/by/4.0/"}
RECORD_FILE = "croissant.json"


# mlcroissant Metadata argument -> the CardText text it is read from
RAI = {"data_use_cases": lambda c: c.uses, "data_limitations": lambda c: c.limitations,
       "data_biases": lambda c: c.bias, "personal_sensitive_information": lambda c: c.personal_information}


def rai_fields(releases: list[Release]) -> dict:
    """The record's Responsible-AI fields: one text per family (prefixed with the family's short title) for
    the list-valued ones; ``data_collection`` (a single text) joins them. Out-of-scope uses join the
    limitations, as the RAI vocabulary has no field of their own."""
    cards = [(short_title(r), r.card) for r in releases if r.card]

    def texts(pick, lead: str = "") -> list[str]:
        return [f"{name}: {lead}{' '.join(pick(card).split())}" for name, card in cards]

    out = {arg: texts(pick) for arg, pick in RAI.items()}
    out["data_limitations"] += texts(lambda c: c.out_of_scope, "out of scope: ")
    out["data_collection"] = "\n\n".join(texts(lambda c: c.collection))
    return {k: v for k, v in out.items() if v}


def record_set_name(config_name: str, split: str) -> str:
    return f"{config_name}-{split}"


def _data_type(mlc, kind: str):
    return {"int64": mlc.DataType.INTEGER, "float64": mlc.DataType.FLOAT, "bool": mlc.DataType.BOOL,
            "list[image]": mlc.DataType.IMAGE_OBJECT}.get(kind, mlc.DataType.TEXT)


def build(folder: Path, *, name: str, description: str, subsets: list[Subset], licenses: list[str],
          cite_as: str, date_published: str, version: str, url: str, keywords: list[str] = (),
          rai: dict | None = None) -> dict:
    """The record (a JSON-LD dict) of the Parquet files already written under `folder`; `rai`: mlcroissant
    Metadata's Responsible-AI arguments (rai_fields)."""
    import mlcroissant as mlc

    ctx = mlc.Context()
    files, record_sets = [], []
    for subset in subsets:
        for split in subset.splits:
            rs = record_set_name(subset.name, split.name)
            rel = f"{subset.name}/{split.name}.parquet"
            file_id = f"{rs}-parquet"
            files.append(mlc.FileObject(ctx=ctx, id=file_id, name=file_id, content_url=rel,
                                        encoding_formats=["application/x-parquet"],
                                        sha256=sha256_file(folder / rel),
                                        description=f"config {subset.name}, split {split.name}"))
            fields = []
            for col in subset.columns:
                source = mlc.Source(ctx=ctx, file_object=file_id, extract=mlc.Extract(ctx=ctx, column=col.name),
                                    transforms=[mlc.Transform(ctx=ctx, json_path="bytes")]
                                    if col.type == "list[image]" else [])
                fields.append(mlc.Field(ctx=ctx, id=f"{rs}/{col.name}", name=col.name, description=col.description,
                                        data_types=[_data_type(mlc, col.type)], source=source,
                                        repeated=col.type.startswith("list[")))
            record_sets.append(mlc.RecordSet(ctx=ctx, id=rs, name=rs, fields=fields,
                                             description=f"{subset.description} (split {split.name})"))
    metadata = mlc.Metadata(ctx=ctx, name=name, description=description, cite_as=cite_as,
                            license=[LICENSE_URLS.get(x, x) for x in licenses], url=url,
                            date_published=date_published, version=version, distribution=files,
                            record_sets=record_sets, keywords=list(keywords) or None, in_language=["en"],
                            **(rai or {}))
    if metadata.issues.errors:
        raise ExportError(f"croissant record: {' '.join(metadata.issues.report().split())}")
    return metadata.to_json()


def write(folder: Path, record: dict) -> Path:
    path = folder / RECORD_FILE
    path.write_text(json.dumps(record, indent=2, ensure_ascii=False, default=str) + "\n", encoding="utf-8")
    return path


def check(path: Path) -> None:
    """Load the written record with mlcroissant; an error it reports is one line (ExportError)."""
    import mlcroissant as mlc

    try:
        dataset = mlc.Dataset(jsonld=str(path))
    except mlc.ValidationError as exc:
        raise ExportError(f"{path}: mlcroissant rejects the record: {' '.join(str(exc).split())}") from None
    if dataset.metadata.issues.errors:
        raise ExportError(f"{path}: mlcroissant: {' '.join(dataset.metadata.issues.report().split())}")
