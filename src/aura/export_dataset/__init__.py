"""`python -m aura export-dataset`: every family's benchmark as one Hugging Face dataset folder.

The folder holds one Parquet file per split (``<config>/<split>.parquet``), a dataset card (``README.md``,
YAML front matter with the configs, features and licences that `datasets.load_dataset` reads; the
citations are in the card's text, as Hugging Face's card metadata has no citation field)
and a Croissant JSON-LD record (``croissant.json``, checked with mlcroissant before the folder is put in
place). The construction provenance (prompt hashes, model ids, source pins) is written into the card.
A family says what its benchmark is for and where it falls short in a :class:`CardText` (the card's Uses,
Out-of-scope use, Limitations, Bias and Personal-information sections, the Croissant record's ``rai:``
fields, the card's task categories, tags, annotation creators and source datasets); the core only
assembles them and names no family. A release whose ``demo`` gives a reason (the family's demo data or an
embedded model built it) makes the export a demo, as does a run whose config is not the paper's.

A family takes part through its manifest's ``export`` hook: a ``"module:function"`` that takes the run's
Config and returns a :class:`Release` built from the files the run produced (no model call). This module
holds only those plain records, so a manifest or a family's export module can import it for free; the
heavy packages (datasets, pyarrow, mlcroissant) are imported inside the command only.

Column types (``Column.type``): ``string``, ``int64``, ``float64``, ``bool``, ``list[string]``,
``json`` (a nested value stored as JSON text; by convention the column's name ends in ``_json``) and
``list[image]`` (image files, stored in the Parquet file as Hugging Face ``Image`` structs ``{bytes,
path}``; a row gives the files' paths). Any value may be None (null).

`aura.export_dataset.parquet.read_split(folder, config_name, split)` reads a split back as a list of dicts.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..errors import UserError

TYPES = ("string", "int64", "float64", "bool", "list[string]", "json", "list[image]")


class ExportError(UserError):
    """A produced file that is missing or cannot be exported: one line naming it, nothing written."""


@dataclass(frozen=True)
class Column:
    """One column of a config: its name, type (one of TYPES) and what it holds (the card's field table)."""
    name: str
    type: str
    description: str

    def __post_init__(self) -> None:
        if self.type not in TYPES:
            raise ValueError(f"column {self.name}: type {self.type!r} is not one of {list(TYPES)}")


@dataclass(frozen=True)
class Split:
    """One split: its name, the produced file its rows came from, the rows (dicts keyed by column name) and
    the licence of its content (a Hugging Face licence id, "unknown" when the project records none)."""
    name: str
    source: str
    rows: list[dict[str, Any]]
    license: str = "unknown"


@dataclass(frozen=True)
class Subset:
    """One Hugging Face config: its name (unique over every family), a description, its columns and its
    splits; `provenance_files` are the produced files whose sidecars tell how it was built (the splits'
    own files are read too)."""
    name: str
    description: str
    columns: tuple[Column, ...]
    splits: tuple[Split, ...]
    provenance_files: tuple[str, ...] = ()


@dataclass(frozen=True)
class CardText:
    """What a family says of its benchmark, in its own words (Markdown paragraphs): what the data are for
    (`uses`), what they must not be used for (`out_of_scope`), their `limitations`, known `bias`es, the
    personal and sensitive information they hold (`personal_information`) and how they were collected
    (`collection`: the Croissant record's ``rai:dataCollection``). The tuples feed the card's front matter:
    Hugging Face task ids (`task_categories`), `tags`, `annotations_creators` (expert-generated,
    machine-generated, found, ...) and `source_datasets` ("original" or "extended|<source>")."""
    uses: str
    out_of_scope: str
    limitations: str
    bias: str
    personal_information: str
    collection: str
    task_categories: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    annotations_creators: tuple[str, ...] = ()
    source_datasets: tuple[str, ...] = ()


@dataclass(frozen=True)
class Release:
    """What one family exports: its title, configs, BibTeX citations (the benchmark's and its sources', each
    with authors, year and url), where its data came from (`sources`: one dict each, e.g. name, url, commit,
    licence, checksums; no local paths: `aura.export_dataset.public_paths`), notes for the card (items left
    out and why), its `card` text, and `demo`: why these rows are not the benchmark (demo data or an
    embedded model built them; `aura.stats.reproduction.demo_reason`), None when they are."""
    family: str
    title: str
    subsets: tuple[Subset, ...]
    citations: tuple[str, ...] = ()
    sources: tuple[dict[str, Any], ...] = ()
    notes: tuple[str, ...] = field(default_factory=tuple)
    card: CardText | None = None
    demo: str | None = None
