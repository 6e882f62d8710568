"""A paper checked against itself, on its reference rows alone (``aura.stats.reference`` format).

Three checks, each giving findings as rows (``FINDING_COLUMNS``: table, row, column, check, detail):

- ``check_percentages``: a percentage (or fraction) with a stated n: is there a whole k in 0..n with k/n
  equal to the value at its printed decimals? Three conventions pass: rounding half up or half to even
  (|scale*k/n - value| <= half a unit of the last printed decimal) and truncation (value <= scale*k/n < value +
  one unit: 3/77 = 3.896% printed 3.89). A cell only truncation explains is a finding of check
  ``percentage (truncated)``, saying so (the paper then mixes conventions, or truncates); a cell none explains
  is a finding of check ``percentage``. Rows whose ``measures`` is no k/n proportion although an
  n is stated (an interval bound, a mean over units) are left out when ``checks.yaml`` lists them under
  ``not_proportions``.
- ``check_averages``: an average column against its parts: within each row, the mean of the part columns'
  printed values must equal the printed average within rounding (half a unit of the average's last decimal
  plus half a unit of the parts' last decimal, as the parts were rounded too).
- ``check_same_cases``: two tables counting the same cases (e.g. per type and per domain): per model (the
  ``model`` column, else the row label), the implied count sum(value/scale * n) over each table's columns must
  agree within the cells' rounding (sum of n * half a unit / scale), and so must the sums of n.

``checks.yaml`` in a reference folder names the averages and the tables that count the same cases;
``check_reference(folder)`` runs all three on the folder.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict

from ..errors import UserError
from .reference import SCALE, load_reference, load_yaml_model

FINDING_COLUMNS = ["table", "row", "column", "check", "detail"]
SLACK = 1e-9


class Average(BaseModel):
    model_config = ConfigDict(extra="forbid")
    table: str
    column: str
    parts: list[str]


class Counted(BaseModel):
    model_config = ConfigDict(extra="forbid")
    table: str
    columns: list[str]


class Checks(BaseModel):
    model_config = ConfigDict(extra="forbid")
    not_proportions: list[str] = []
    averages: list[Average] = []
    same_cases: list[tuple[Counted, Counted]] = []


def _half(decimals) -> float:
    return 0.5 * 10.0 ** -float(decimals)


def _fmt(x: float, d: int) -> str:
    return f"{x:.{d}f}"


def _findings(rows: list[dict]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=FINDING_COLUMNS)


def check_percentages(ref: pd.DataFrame, not_proportions=()) -> pd.DataFrame:
    """Findings for every percent / fraction row with an n that no whole k/n rounds to (check ``percentage``) or
    that only truncation explains (``percentage (truncated)``); rows whose ``measures`` is in
    ``not_proportions`` left out."""
    out = []
    rows = ref["unit"].isin(list(SCALE)) & ref["n"].notna() & ~ref["measures"].isin(list(not_proportions))
    for r in ref[rows].itertuples(index=False):
        n, d, scale = int(r.n), int(r.decimals), SCALE[r.unit]
        rates = scale * np.arange(n + 1) / n
        if np.any(np.abs(rates - r.value) <= _half(d) + SLACK):
            continue
        cell = {"table": r.table, "row": r.row, "column": r.column}
        truncated = np.flatnonzero((rates >= r.value - SLACK) & (rates < r.value + 2 * _half(d) - SLACK))
        if truncated.size:
            j = int(truncated[0])
            out.append({**cell, "check": "percentage (truncated)",
                        "detail": f"{j}/{n} = {rates[j]:.{d + 2}f} prints as {r.value:.{d}f} only when truncated "
                                  f"(rounded: {_fmt(rates[j], d)})"})
            continue
        k = int(np.searchsorted(rates, r.value))
        near = ", ".join(f"{j}/{n} = {_fmt(rates[j], d)}" for j in (k - 1, k) if 0 <= j <= n)
        out.append({**cell, "check": "percentage",
                    "detail": f"no whole k gives k/{n} = {r.value:.{d}f} (nearest: {near})"})
    return _findings(out)


def _cells(ref: pd.DataFrame, table: str, columns: list[str]) -> pd.DataFrame:
    part = ref[(ref["table"] == table) & ref["column"].isin(columns)]
    missing = sorted(set(columns) - set(part["column"]))
    if part.empty or missing:
        raise UserError(f"{table}: no reference rows for column(s) {', '.join(missing or columns)}")
    return part.assign(key=part["model"].where(part["model"].notna() & (part["model"] != ""), part["row"]))


def check_averages(ref: pd.DataFrame, table: str, column: str, parts: list[str]) -> pd.DataFrame:
    """Findings for every row of ``table`` whose ``column`` is not the mean of its ``parts`` within rounding
    (a row lacking a part is a finding too)."""
    avg, cells = _cells(ref, table, [column]), _cells(ref, table, parts)
    out = []
    for a in avg.itertuples(index=False):
        mine = cells[cells["row"] == a.row]
        if len(mine) != len(parts):
            out.append({"table": table, "row": a.row, "column": column, "check": "average",
                        "detail": f"{len(mine)} of the {len(parts)} parts present"})
            continue
        mean, tol = mine["value"].mean(), _half(a.decimals) + _half(mine["decimals"].max())
        if abs(mean - a.value) > tol + SLACK:
            out.append({"table": table, "row": a.row, "column": column, "check": "average",
                        "detail": f"mean of {', '.join(parts)} is {mean:.4f}, printed {a.value:.{a.decimals}f} "
                                  f"(off by {abs(mean - a.value):.4f}; rounding allows {tol:g})"})
    return _findings(out)


def _implied(cells: pd.DataFrame) -> pd.DataFrame:
    """Per key: the implied count sum(value/scale*n), its rounding slack, the sum of n, a row label."""
    c = cells[cells["n"].notna()].copy()
    scale = c["unit"].map(SCALE)
    n = c["n"].astype(float)
    c["count"], c["slack"], c["cases"] = c["value"] / scale * n, c["decimals"].map(_half) / scale * n, n
    return c.groupby("key", sort=False).agg(row=("row", "first"), count=("count", "sum"), slack=("slack", "sum"),
                                            cases=("cases", "sum"))


def check_same_cases(ref: pd.DataFrame, a: Counted, b: Counted) -> pd.DataFrame:
    """Findings for every model whose implied count (or number of cases) differs between two tables over
    the same cases; a model in one table only is a finding too."""
    ia, ib = _implied(_cells(ref, a.table, a.columns)), _implied(_cells(ref, b.table, b.columns))
    table, out = f"{a.table} / {b.table}", []
    for key in list(dict.fromkeys([*ia.index, *ib.index])):
        if key not in ia.index or key not in ib.index:
            out.append({"table": table, "row": key, "column": "implied count", "check": "same cases",
                        "detail": f"only in {a.table if key in ia.index else b.table}"})
            continue
        x, y = ia.loc[key], ib.loc[key]
        if x["cases"] != y["cases"]:
            out.append({"table": table, "row": x["row"], "column": "cases", "check": "same cases",
                        "detail": f"{x['cases']:.0f} cases in {a.table} against {y['cases']:.0f} in {b.table}"})
        if abs(x["count"] - y["count"]) > x["slack"] + y["slack"] + SLACK:
            out.append({"table": table, "row": x["row"], "column": "implied count", "check": "same cases",
                        "detail": f"{x['count']:.1f} of {x['cases']:.0f} in {a.table} against "
                                  f"{y['count']:.1f} of {y['cases']:.0f} in {b.table}"})
    return _findings(out)


def load_checks(path) -> Checks:
    """A reference folder's ``checks.yaml`` (no file: no average or same-cases check); a bad file stops with
    one line."""
    path = Path(path)
    if not path.exists():
        return Checks()
    return load_yaml_model(path, Checks)


def average_parts(ref: pd.DataFrame, checks: Checks) -> dict:
    """Each average row's index -> its parts' indexes (the same table and row label, the columns ``checks.yaml``
    names), for the averages whose every part is present with an n."""
    out = {}
    for avg in checks.averages:
        for i, r in ref[(ref["table"] == avg.table) & (ref["column"] == avg.column)].iterrows():
            mine = ref[(ref["table"] == avg.table) & (ref["row"] == r["row"]) & ref["column"].isin(avg.parts)]
            if len(mine) == len(avg.parts) and mine["n"].notna().all():
                out[i] = list(mine.index)
    return out


def with_part_n(ref: pd.DataFrame, parts: dict) -> pd.DataFrame:
    """``ref`` with an average's n, where the paper states none, the sum of its parts' n (a mean over parts of those
    sizes), said in column ``n_basis``."""
    out = ref.copy()
    out["n_basis"] = ["stated" if not pd.isna(n) else "" for n in out["n"]]
    for i, members in parts.items():
        if pd.isna(out.at[i, "n"]):
            out.at[i, "n"] = int(out.loc[members, "n"].sum())
            out.at[i, "n_basis"] = "the paper's parts' n summed"
    return out


def consistency(ref: pd.DataFrame, checks: Checks) -> pd.DataFrame:
    """All findings: percentages, then the averages, then the same-cases pairs ``checks`` names."""
    parts = [check_percentages(ref, checks.not_proportions)]
    parts += [check_averages(ref, a.table, a.column, a.parts) for a in checks.averages]
    parts += [check_same_cases(ref, a, b) for a, b in checks.same_cases]
    return pd.concat(parts, ignore_index=True)


def check_reference(folder) -> pd.DataFrame:
    """Every check on a family's reference folder (its CSVs and its ``checks.yaml``)."""
    folder = Path(folder)
    return consistency(load_reference(folder), load_checks(folder / "checks.yaml"))
