"""The families' reference data (issue 34): every `src/aura/families/*/reference/*.csv` holds numbers a paper
reports, one row per number, in one format. Checked here: the exact columns, the units, numeric values, the
denominators, the value ranges each unit allows, models named as the family's paper config names them, no
(table, row, column) given twice within a family, and that the files ship with the package."""
from __future__ import annotations

import fnmatch
import re
import tomllib
from functools import lru_cache
from pathlib import Path

import pandas as pd
import pytest

import aura.families
from aura.config import read_raw

COLUMNS = ["table", "row", "column", "value", "unit", "n", "where", "measures", "model", "note"]
REQUIRED = ["table", "row", "column", "value", "unit", "where", "measures"]
UNITS = {"percent": (0.0, 100.0), "fraction": (0.0, 1.0), "count": (0.0, float("inf")), "r": (-1.0, 1.0)}
FAMILIES = Path(aura.families.__file__).parent
REPO = Path(__file__).resolve().parents[2]
FILES = sorted(FAMILIES.glob("*/reference/*.csv"))
POSITIVE_INT = re.compile(r"[1-9][0-9]*")


def family_of(path: Path) -> str:
    return path.parent.parent.name


def read(path: Path) -> pd.DataFrame:
    return pd.read_csv(path, dtype=str, keep_default_na=False, encoding="utf-8")


@lru_cache(maxsize=None)
def paper_models(family: str) -> frozenset[str] | None:
    """The models of the family's paper config: the config of `config/` named `<family>-paper` (`aura-paper` is
    paper.yaml), with what it `extends` merged in. None when no config has that name."""
    for path in sorted((REPO / "config").glob("*.yaml")):
        raw = read_raw(path)
        if raw.get("name") == f"{family}-paper":
            return frozenset(raw.get("models") or {})
    return None


def test_the_reference_files_are_there():
    families = {family_of(p) for p in FILES}
    assert {"aura", "pasbench"} <= families, f"reference CSVs found only for {sorted(families)}"


@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{family_of(p)}/{p.name}")
def test_format(path: Path):
    df = read(path)
    assert list(df.columns) == COLUMNS, f"{path.name}: columns {list(df.columns)}"
    assert len(df), f"{path.name}: no rows"
    where = lambda mask: df.index[mask].map(lambda i: f"line {i + 2}").tolist()  # noqa: E731
    for col in REQUIRED:
        blank = df[col].str.strip() == ""
        assert not blank.any(), f"{path.name}: blank {col} at {where(blank)}"
    bad_unit = ~df["unit"].isin(UNITS)
    assert not bad_unit.any(), f"{path.name}: unit not in {sorted(UNITS)} at {where(bad_unit)}"
    value = pd.to_numeric(df["value"], errors="coerce")
    assert not value.isna().any(), f"{path.name}: value not a number at {where(value.isna())}"
    given = df["n"] != ""
    bad_n = given & ~df["n"].map(lambda s: bool(POSITIVE_INT.fullmatch(s)))
    assert not bad_n.any(), f"{path.name}: n not a positive integer at {where(bad_n)}"
    for unit, (lo, hi) in UNITS.items():
        out = (df["unit"] == unit) & ~value.between(lo, hi)
        assert not out.any(), f"{path.name}: {unit} outside [{lo}, {hi}] at {where(out)}"
    counts = (df["unit"] == "count") & given
    n = pd.to_numeric(df["n"].where(given), errors="coerce")
    over = counts & ((value != value.round()) | (value > n))
    assert not over.any(), f"{path.name}: a count with n must be a whole number at most n, at {where(over)}"


@pytest.mark.parametrize("family", sorted({family_of(p) for p in FILES}))
def test_family_rows(family: str):
    frames = [read(p).assign(_file=p.name) for p in FILES if family_of(p) == family]
    df = pd.concat(frames, ignore_index=True)
    dup = df[df.duplicated(["table", "row", "column"], keep=False)]
    assert dup.empty, f"{family}: (table, row, column) given twice:\n{dup[['_file', 'table', 'row', 'column']]}"
    named = df[df["model"] != ""]
    if named.empty:
        return
    models = paper_models(family)
    assert models is not None, f"{family}: rows name models but no config/*.yaml is named {family}-paper"
    unknown = named[~named["model"].isin(models)]
    assert unknown.empty, f"{family}: models not in its paper config:\n{unknown[['_file', 'row', 'model']]}"


def test_the_files_ship_with_the_package():
    """pyproject's package-data patterns for aura.families cover every reference CSV."""
    patterns = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"][
        "package-data"]["aura.families"]
    missing = [p.relative_to(FAMILIES).as_posix() for p in FILES
               if not any(fnmatch.fnmatch(p.relative_to(FAMILIES).as_posix(), pat) for pat in patterns)]
    assert not missing, f"not covered by package-data: {missing}"


@pytest.mark.parametrize("family", sorted({family_of(p) for p in FILES}))
def test_the_core_loader_reads_them(family: str):
    """aura.stats.reference.load_reference (the loader the reproduction report uses) takes every row."""
    load_reference = pytest.importorskip("aura.stats.reference").load_reference
    folder = FAMILIES / family / "reference"
    ref = load_reference(folder)
    assert len(ref) == sum(len(read(p)) for p in FILES if family_of(p) == family)
