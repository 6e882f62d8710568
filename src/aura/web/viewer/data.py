"""The produced files of a run, read once into pandas frames the viewer queries.

Files are found through the merged layout (`aura.pipeline.layout.layout`); each enabled family whose
manifest names a viewer part (`part.ViewerPart`) reads its own files into one frame of list rows
(`RunData.frames[family]`) and keeps the detail records its item pages show. A family with no row
(nothing produced yet, or no viewer part) is not listed; a listed family's part names the folders whose
files its pages show (`media`: the only folders the viewer serves files from). The helpers families read
with are here: `expand` (a pattern's existing files with their wildcard values), `checked_rows` (a JSONL
file's records, checked), `list_frame` (rows sorted once into a frame). The columns a family's filters
read become categoricals, so a filter is one comparison.
"""
from __future__ import annotations

import glob
import re
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from ...families import enabled
from ...io import read_jsonl
from ...pipeline.layout import layout
from .part import ViewerPart, family_title, make_part


def expand(pattern: str, root: Path = Path(".")) -> list[tuple[dict, Path]]:
    """Every existing file matching a layout pattern (relative to `root` unless absolute), with its
    wildcard values ({model}, {judge}, {shard}, {variant} ...), sorted by path."""
    full = str(root / pattern)
    parts = re.split(r"\{(\w+)\}", full)
    pattern_glob = "".join("*" if i % 2 else glob.escape(p) for i, p in enumerate(parts))
    rx = re.compile("".join(f"(?P<{p}>[^/]+)" if i % 2 else re.escape(p) for i, p in enumerate(parts)) + "$")
    found = []
    for name in sorted(glob.glob(pattern_glob)):
        m = rx.match(name)
        if m and Path(name).is_file():
            found.append((m.groupdict(), Path(name)))
    return found


def checked_rows(path: Path, *keys: str):
    """The records of a produced JSONL file, each checked for the fields the viewer reads: a file the
    pipeline did not write stops the viewer with one line naming it and the record."""
    for n, row in enumerate(read_jsonl(path), 1):
        missing = [k for k in keys if k not in row] if isinstance(row, dict) else ["{...}"]
        if missing:
            raise ValueError(f"{path}: record {n} has no '{missing[0]}' (not a file this pipeline wrote)")
        yield row


def list_frame(rows: list[dict], sort: list[str]) -> pd.DataFrame:
    """List rows as a frame, sorted by `sort` (stable) and numbered from 0."""
    df = pd.DataFrame(rows)
    if df.empty:
        return df
    return df.sort_values(sort, kind="stable").reset_index(drop=True)


def _categorical(df: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    for col in dict.fromkeys(["model", *columns]):
        if col in df:
            df[col] = df[col].fillna("").astype(str).astype("category")
    return df


@dataclass
class RunData:
    """Everything the viewer shows, read from one config's produced files."""

    raw: dict
    root: Path = Path(".")
    families: list[str] = field(default_factory=list)  # the families listed, in the config's order
    frames: dict[str, pd.DataFrame] = field(default_factory=dict)
    parts: dict[str, ViewerPart] = field(default_factory=dict)  # each listed family's part (its detail records)
    labels: dict[str, str] = field(default_factory=dict)  # model key -> display label
    # family -> its produced verdict table (the manifest's `reproduction` layout key; aura.stats.reproduction)
    reproductions: dict[str, pd.DataFrame] = field(default_factory=dict)
    titles: dict[str, str] = field(default_factory=dict)  # every enabled family's title, listed or not
    media: list[Path] = field(default_factory=list)  # the folders the parts show files of (resolved, existing)

    @classmethod
    def load(cls, raw: dict, root: Path | str = ".") -> "RunData":
        data = cls(raw=raw, root=Path(root))
        data.labels = {k: (v or {}).get("label") or k for k, v in (raw.get("models") or {}).items()}
        L = layout(raw)
        for family in enabled(raw):
            part = make_part(family)
            data.titles[family.name] = part.title if part is not None else family_title(family)
            frame = part.load(data, L) if part is not None else None
            if frame is not None and len(frame):
                data.families.append(family.name)
                data.frames[family.name] = _categorical(frame, part.columns)
                data.parts[family.name] = part
                for folder in part.media(data, L):
                    folder = (data.root / folder).resolve()
                    if folder.is_dir() and folder not in data.media:
                        data.media.append(folder)
            verdicts = data.path(L[family.reproduction]) if family.reproduction else None
            if verdicts is not None and verdicts.is_file():
                data.reproductions[family.name] = pd.read_csv(verdicts, keep_default_na=False)
        return data

    @property
    def filters(self) -> dict[str, tuple[str, ...]]:
        """Family -> the filters its lists offer (what `pages.Links` keeps in a list's URL)."""
        return {name: part.filters for name, part in self.parts.items()}

    def files(self, pattern: str) -> list[tuple[dict, Path]]:
        return expand(pattern, self.root)

    def path(self, pattern: str) -> Path:
        return self.root / pattern
