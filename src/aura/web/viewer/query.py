"""Server-side queries over one family's rows: equality filters, text search, pagination.

A filter is one of the family's `filters` (`part.ViewerPart`); for a family with label axes it reads
the axis' column when there is one (`label_<axis>`, `agreement_<axis>`; the family's default axis
unless one of its axes is given). `label=excluded` selects the rows without a valid label on the axis: the rows a rate's
denominator leaves out. Masks are numpy comparisons over categoricals; a text search's mask is cached
per (family, text), so paging through results does not search again.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import pandas as pd

from .data import RunData

PER_PAGE = 50
EXCLUDED = "excluded"


@dataclass
class Page:
    rows: list[dict]
    total: int
    page: int
    pages: int
    per_page: int


def column(frame: pd.DataFrame, name: str, axis: str) -> str | None:
    """The frame column a filter reads, or None when the family has no such column."""
    for col in (f"{name}_{axis}", name):
        if col in frame.columns:
            return col
    return None


def options(frame: pd.DataFrame, filters: tuple[str, ...], axis: str = "") -> dict[str, list[str]]:
    """Filter -> the values present (what the select boxes offer)."""
    out = {}
    for name in filters:
        col = column(frame, name, axis)
        if col is not None:
            values = sorted(v for v in frame[col].cat.categories if v != "")
            if name == "label" and col != name:
                values.append(EXCLUDED)
            if values:
                out[name] = values
    return out


class Searcher:
    """Text-search masks per family, cached (a page change reuses the last search)."""

    def __init__(self, data: RunData):
        self.data = data
        self.mask = lru_cache(maxsize=64)(self._mask)

    def _mask(self, family: str, text: str) -> np.ndarray:
        return self.data.frames[family]["text"].str.contains(text.lower(), regex=False).to_numpy()


def query(data: RunData, family: str, filters: dict[str, str], q: str = "", axis: str = "",
          page: int = 1, per_page: int = PER_PAGE, searcher: Searcher | None = None) -> Page:
    frame, part = data.frames[family], data.parts[family]
    axis = axis if axis in part.axes else part.axis
    mask = np.ones(len(frame), dtype=bool)
    for name, value in filters.items():
        if not value or name not in part.filters:
            continue
        col = column(frame, name, axis)
        if col is None:
            continue
        values = frame[col]
        if name == "label" and value == EXCLUDED and col != name:
            mask &= ~values.isin(part.axes[axis]).to_numpy() & (values != "").to_numpy()
        else:
            mask &= (values == value).to_numpy()
    if q.strip():
        mask &= (searcher or Searcher(data)).mask(family, q.strip())
    idx = np.flatnonzero(mask)
    total = len(idx)
    pages = max(1, math.ceil(total / per_page))
    page = min(max(1, page), pages)
    chosen = frame.iloc[idx[(page - 1) * per_page: page * per_page]]
    rows = chosen.drop(columns=["text"]).to_dict("records")
    return Page(rows=rows, total=total, page=page, pages=pages, per_page=per_page)
