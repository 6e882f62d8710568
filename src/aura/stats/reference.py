"""A paper's reported numbers as data, and the margins a verdict on them uses.

Reference data: one CSV per table or claim of a paper, with exactly the columns ``COLUMNS``:

- ``table``, ``row``, ``column``: where the number sits, labels as the paper prints them (e.g. "Table 3",
  "GPT-5", "TS"); unique within a family's reference folder;
- ``value``: the number as printed (its decimals are kept: "0.00" has two);
- ``unit``: percent | fraction | count | r;
- ``n``: the denominator the paper states (blank when it states none);
- ``where``: section / figure / table of the paper; ``measures``: a short key naming the family's metric;
- ``model``: the config's model name when the row is a model (else blank: read as ""); ``note``: free text. A
  note starting "upper bound:" / "lower bound:" makes the row a bound.

``load_reference`` validates a file (or a folder of them) and stops with one line naming the file and line.

Margins (``margins.yaml`` beside the CSVs, ``load_margins``): what a reader of the paper would still call the same
result, per *kind* of row, each with its reason. A row's kind (``kind_of``): ``bound`` when its note says so, else
the kind ``margins.yaml`` lists its ``measures`` under, else its unit's default (``DEFAULT_KIND``: a percent or
fraction is a ``rate``, a count a ``count``, r a ``correlation``). Kinds and their margins:

- ``rate``, ``mean``, ``difference``: percentage points (a fraction's row: points / 100);
- ``count``: a count with an n on both sides is a random count, compared as the rate k/n with the ``rate``
  margin; a count without n is compared as a number, within ``margin`` percent of the reported value;
- ``correlation``: in units of r;
- ``exact``: a fact of the input data, the same in every faithful run (margin 0: within its printed rounding);
- ``bound``: margin 0 (a bound holds or not).
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

import pandas as pd
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ..errors import UserError

COLUMNS = ["table", "row", "column", "value", "unit", "n", "where", "measures", "model", "note"]
UNITS = ("percent", "fraction", "count", "r")
SCALE = {"percent": 100.0, "fraction": 1.0}  # proportions; count and r are compared in their own unit
KINDS = ("rate", "mean", "difference", "count", "correlation", "exact", "bound")
DEFAULT_KIND = {"percent": "rate", "fraction": "rate", "count": "count", "r": "correlation"}
BOUNDS = ("upper bound", "lower bound")
_NUMBER = re.compile(r"-?\d+(\.\d+)?")


class ReferenceRow(BaseModel):
    """One reported number. ``value`` stays the printed text; ``load_reference`` adds the float and its
    decimals."""
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    table: str = Field(min_length=1)
    row: str = Field(min_length=1)
    column: str = Field(min_length=1)
    value: str
    unit: Literal["percent", "fraction", "count", "r"]
    n: int | None = Field(default=None, gt=0)
    where: str = Field(min_length=1)
    measures: str = Field(pattern=r"^[A-Za-z][A-Za-z0-9_.-]*$")  # a key: no spaces
    model: str = ""
    note: str = ""

    @field_validator("value")
    @classmethod
    def _printed_number(cls, v: str) -> str:
        if not _NUMBER.fullmatch(v):
            raise ValueError(f"not a number as printed: {v!r}")
        return v

    @field_validator("n", mode="before")
    @classmethod
    def _blank_is_none(cls, v):
        return None if isinstance(v, str) and not v.strip() else v


def decimals(printed: str) -> int:
    """How many decimals a printed number shows ("27.27" -> 2, "100" -> 0)."""
    return len(printed.split(".")[1]) if "." in printed else 0


def bound_of(note: str) -> str:
    """"upper" / "lower" when a row's note starts with "upper bound:" / "lower bound:", else ""."""
    return next((b.split()[0] for b in BOUNDS if str(note).startswith(b + ":")), "")


def _read_one(path: Path) -> pd.DataFrame:
    try:
        raw = pd.read_csv(path, dtype=str, keep_default_na=False)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as e:
        raise UserError(f"{path}: not a readable CSV ({str(e).splitlines()[0] if str(e) else type(e).__name__})")
    if list(raw.columns) != COLUMNS:
        raise UserError(f"{path}: columns must be exactly {','.join(COLUMNS)} (found {','.join(raw.columns)})")
    rows = []
    for i, record in enumerate(raw.to_dict("records"), start=2):  # line 1 is the header
        try:
            rows.append(ReferenceRow(**record).model_dump())
        except ValidationError as e:
            err = e.errors()[0]
            field = ".".join(str(p) for p in err["loc"]) or "row"
            raise UserError(f"{path}, line {i}: {field}: {err['msg']} (got {record.get(field, '')!r})")
        rows[-1].update(file=path.name, line=i)
    return pd.DataFrame(rows, columns=[*COLUMNS, "file", "line"])


def load_reference(path) -> pd.DataFrame:
    """A reference CSV, or every ``*.csv`` of a folder (sorted by name), validated: ``COLUMNS`` with ``value``
    a float, ``model`` a string ("" when blank, in every file: a mix of blank and named models never reads as
    NaN), plus ``decimals`` (as printed), ``bound`` (upper / lower / ""), ``file`` and ``line``. A bad file, an
    empty folder or a number given twice (same table, row, column) stops with one line (``UserError``)."""
    path = Path(path)
    files = sorted(path.glob("*.csv")) if path.is_dir() else [path]
    if not files or not all(f.is_file() for f in files):
        raise UserError(f"{path}: no reference CSV there")
    ref = pd.concat([_read_one(f) for f in files], ignore_index=True)
    dup = ref[ref.duplicated(["table", "row", "column"], keep="first")]
    if not dup.empty:
        d = dup.iloc[0]
        raise UserError(f"{d.file}, line {d.line}: {d.table} / {d.row} / {d.column} is given twice")
    ref["decimals"] = ref["value"].map(decimals)
    ref["value"] = ref["value"].astype(float)
    ref["n"] = ref["n"].astype("Int64")
    ref["model"] = ref["model"].fillna("").astype(str)
    ref["note"] = ref["note"].fillna("").astype(str)
    ref["bound"] = ref["note"].map(bound_of)
    return ref


class Margin(BaseModel):
    """One kind's equivalence margin and why it is what a reader would call the same result."""
    model_config = ConfigDict(extra="forbid")
    margin: float = Field(ge=0)
    reason: str = Field(min_length=20)


class Margins(BaseModel):
    """A reference folder's ``margins.yaml``: the margins per kind, the kinds of the rows whose unit's default
    is not theirs, the test level and the multiplicity control across the family's rows."""
    model_config = ConfigDict(extra="forbid")
    alpha: float = Field(default=0.05, gt=0, lt=1)
    multiplicity: Literal["holm", "fdr_bh"] = "holm"
    margins: dict[Literal[KINDS], Margin]
    kinds: dict[Literal[KINDS], list[str]] = {}


def load_yaml_model(path: Path, model: type[BaseModel]):
    """A YAML file of a reference folder validated as ``model``; a bad file stops with one line naming it and the
    first field at fault."""
    try:
        return model(**(yaml.safe_load(path.read_text(encoding="utf-8")) or {}))
    except (yaml.YAMLError, ValidationError, TypeError) as e:
        first = e.errors()[0] if isinstance(e, ValidationError) else None
        where = ".".join(str(p) for p in first["loc"]) + ": " + first["msg"] if first else str(e).splitlines()[0]
        raise UserError(f"{path}: {where}") from None


def load_margins(folder) -> Margins:
    """The folder's ``margins.yaml``; a missing or bad file stops with one line."""
    path = Path(folder) / "margins.yaml"
    if not path.is_file():
        raise UserError(f"{path}: no margins file (every reference folder declares its margins, docs/reproducing.md)")
    return load_yaml_model(path, Margins)


def kind_of(row, margins: Margins) -> str:
    """A reference row's kind: ``bound`` from its note, else the kind its ``measures`` is listed under, else its
    unit's default."""
    if row["bound"]:
        return "bound"
    listed = next((k for k, measures in margins.kinds.items() if row["measures"] in measures), None)
    return listed or DEFAULT_KIND[row["unit"]]


def with_kinds(ref: pd.DataFrame, margins: Margins, where="margins.yaml") -> pd.DataFrame:
    """``ref`` with a ``kind`` column; a kind without a margin stops with one line."""
    out = ref.assign(kind=[kind_of(r, margins) for _, r in ref.iterrows()])
    missing = sorted(set(out["kind"]) - set(margins.margins))
    if missing:
        raise UserError(f"{where}: no margin for the kind(s) {', '.join(missing)} (rows of the reference use them)")
    return out
