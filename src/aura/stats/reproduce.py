"""Did it reproduce? A paper's reported numbers as data, and a verdict per number.

Reference data: one CSV per table or claim of a paper, with exactly the columns ``COLUMNS``:

- ``table``, ``row``, ``column``: where the number sits, labels as the paper prints them (e.g. "Table 3",
  "GPT-5", "TS"); unique within a family's reference folder;
- ``value``: the number as printed (its decimals are kept: "0.00" has two);
- ``unit``: percent | fraction | count | r;
- ``n``: the denominator the paper states (blank when it states none);
- ``where``: section / figure / table of the paper; ``measures``: a short key naming the family's metric;
- ``model``: the config's model name when the row is a model (else blank); ``note``: free text.

``load_reference`` validates a file (or a folder of them) and stops with one line naming the file and line.

A verdict compares a reported value with a reproduced estimate and its 95% interval (``Estimate``: Wilson for
k/n via ``wilson_estimate``, a clustered bootstrap's percentile interval via ``bootstrap_estimate``):
*within* when lo <= reported <= hi in the reported unit (closed: a value exactly on an edge counts as within),
*outside* otherwise, *not comparable* with a reason from ``REASONS`` when nothing fair can be said.
``compare`` does this for a whole reference frame; ``summary_line`` states the outcome in one line.
The paper-against-itself checks live in ``aura.stats.consistency``.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Literal

import pandas as pd
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ..errors import UserError
from .intervals import wilson

COLUMNS = ["table", "row", "column", "value", "unit", "n", "where", "measures", "model", "note"]
UNITS = ("percent", "fraction", "count", "r")
SCALE = {"percent": 100.0, "fraction": 1.0}  # proportions; count and r are compared in their own unit
WITHIN, OUTSIDE, NOT_COMPARABLE = "within", "outside", "not comparable"
REASONS = ("model unavailable", "different n", "excluded cases", "demo data", "not produced")
VERDICT_COLUMNS = ["table", "row", "column", "model", "measures", "unit", "reported", "reproduced", "lo", "hi",
                   "n", "reported_n", "difference", "verdict", "reason"]
EDGE = 1e-9  # float slack on the interval's edges (a unit conversion's rounding error), in the reported unit
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
    model: str | None = None
    note: str = ""

    @field_validator("value")
    @classmethod
    def _printed_number(cls, v: str) -> str:
        if not _NUMBER.fullmatch(v):
            raise ValueError(f"not a number as printed: {v!r}")
        return v

    @field_validator("n", "model", mode="before")
    @classmethod
    def _blank_is_none(cls, v):
        return None if isinstance(v, str) and not v.strip() else v


def decimals(printed: str) -> int:
    """How many decimals a printed number shows ("27.27" -> 2, "100" -> 0)."""
    return len(printed.split(".")[1]) if "." in printed else 0


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
    a float, plus ``decimals`` (as printed), ``file`` and ``line``. A bad file, an empty folder or a number
    given twice (same table, row, column) stops with one line (``UserError``)."""
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
    return ref


@dataclass(frozen=True)
class Estimate:
    """A reproduced number with its 95% interval and n, in ``unit``; ``reason`` makes it not comparable
    (one of ``REASONS``, optionally followed by ": detail")."""
    value: float
    lo: float
    hi: float
    n: int | None
    unit: str = "fraction"
    method: str = ""
    reason: str | None = None


def wilson_estimate(k: int, n: int, reason: str | None = None) -> Estimate:
    """k/n with its Wilson 95% interval (``aura.stats.intervals.wilson``)."""
    lo, hi = wilson(k, n)
    return Estimate(k / n if n else float("nan"), lo, hi, n, "fraction", "wilson", reason)


def bootstrap_estimate(point: float, lo: float, hi: float, n: int | None, unit: str = "fraction",
                       reason: str | None = None) -> Estimate:
    """A point estimate with a (clustered) bootstrap's percentile interval lo..hi."""
    return Estimate(point, lo, hi, n, unit, "bootstrap", reason)


def convert(x: float, unit: str, to: str) -> float:
    """x from one unit to another: percent <-> fraction; count and r only to themselves."""
    if unit == to:
        return x
    if unit in SCALE and to in SCALE:
        return x * SCALE[to] / SCALE[unit]
    raise UserError(f"cannot compare a {unit} with a {to}")


def _check_reason(reason: str) -> str:
    if reason.split(":")[0].strip() not in REASONS:
        raise UserError(f"not-comparable reason {reason!r}: it must start with one of {', '.join(REASONS)}")
    return reason


def verdict(reported: float, unit: str, estimate: Estimate | None, *, reported_n: int | None = None,
            reason: str | None = None) -> dict:
    """The verdict on one reported number, every value in the reported ``unit``.

    Not comparable (``reason`` says why) when a ``reason`` is given (it wins), the estimate carries one, there
    is no estimate ("not produced"), or the paper states an n the estimate does not have ("different n").
    Otherwise *within* when lo <= reported <= hi (a reported value exactly on an edge is within; ``EDGE`` of
    float slack), else *outside*. ``difference`` = reproduced - reported, blank when not comparable."""
    reason = reason or (estimate.reason if estimate else None) or (None if estimate else "not produced")
    if not reason and reported_n and estimate.n and int(reported_n) != int(estimate.n):
        reason = f"different n: paper {int(reported_n)}, reproduced {int(estimate.n)}"
    out = {"reported": reported, "reproduced": math.nan, "lo": math.nan, "hi": math.nan,
           "n": estimate.n if estimate else None, "reported_n": reported_n, "difference": math.nan}
    if estimate:
        out.update({k: convert(getattr(estimate, k), estimate.unit, unit) for k in ("lo", "hi")},
                   reproduced=convert(estimate.value, estimate.unit, unit))
    if reason:
        return {**out, "verdict": NOT_COMPARABLE, "reason": _check_reason(reason)}
    if any(math.isnan(out[k]) for k in ("reproduced", "lo", "hi")):
        return {**out, "verdict": NOT_COMPARABLE, "reason": "not produced: no estimate or interval"}
    inside = out["lo"] - EDGE <= reported <= out["hi"] + EDGE
    return {**out, "difference": out["reproduced"] - reported, "verdict": WITHIN if inside else OUTSIDE,
            "reason": ""}


def compare(ref: pd.DataFrame, lookup: Callable[[pd.Series], Estimate | str | None],
            reason: str | None = None) -> pd.DataFrame:
    """One verdict row per reference row (``VERDICT_COLUMNS``). ``lookup(row)`` gives the reproduced
    ``Estimate``, None (not produced) or a reason string (not comparable); ``reason`` applies to every row
    (e.g. "demo data": the smoke run never gets a verdict)."""
    rows = []
    for _, r in ref.iterrows():
        found = lookup(r)
        est, why = (None, found) if isinstance(found, str) else (found, reason)
        n = None if pd.isna(r["n"]) else int(r["n"])
        rows.append({**{k: r[k] for k in ("table", "row", "column", "model", "measures", "unit")},
                     **verdict(float(r["value"]), r["unit"], est, reported_n=n, reason=why)})
    return pd.DataFrame(rows, columns=VERDICT_COLUMNS)


def summary_line(family: str, verdicts: pd.DataFrame) -> str:
    """"<family>: k of n reported numbers within the reproduced 95% interval (m not comparable)"; n counts
    every reference row, the m not comparable ones included."""
    k = int((verdicts["verdict"] == WITHIN).sum())
    m = int((verdicts["verdict"] == NOT_COMPARABLE).sum())
    return f"{family}: {k} of {len(verdicts)} reported numbers within the reproduced 95% interval ({m} not comparable)"
