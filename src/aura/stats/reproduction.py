"""A family's reproduction stage, its shared part: reference rows -> verdict table + the paper's own findings.

A family's stage (thin: ``<family>/reproduction.py``) reads the stats files its run produced, defines
``lookup(row)`` (a reference row -> ``Estimate`` | None | reason string, ``aura.stats.reproduce.compare``) and
calls ``write(ctx, family, reference_folder, lookup, reason=demo_reason(...))``. This module gives it:

- ``demo_reason``: "demo data: ..." when the run reads the family's own demo data (a folder its manifest lists
  under ``demo_data``) or a model it names is on an embedded (``kind: local``) endpoint; then every row is
  not comparable and ``lookup`` is never called: the smoke run gets no verdict.
- estimates beyond Wilson and bootstrap: ``exact_estimate`` (a number computed exactly from the data, a count
  or a mean: within when it rounds to the printed value) and ``pearson_estimate`` (r with its Fisher-z 95%
  interval); ``read_input`` (a stats CSV input, empty when absent);
- ``bounded``: a reported bound (its ``note`` starts with "upper bound:" / "lower bound:") is within when the
  reproduced interval reaches the bound's side (lo <= bound, hi >= bound), not when it covers the point.

Outputs: ``verdicts`` (``VERDICT_COLUMNS`` + ``bound``) and ``findings`` (``consistency.FINDING_COLUMNS``).
"""
from __future__ import annotations

import math
import sys
from pathlib import Path

import pandas as pd

from ..pipeline.context import StageContext
from .consistency import check_reference
from .reproduce import EDGE, NOT_COMPARABLE, OUTSIDE, WITHIN, Estimate, compare, load_reference, summary_line
from .tables import write_csv

BOUNDS = ("upper bound", "lower bound")


def demo_reason(config, family, data=(), models=()) -> str | None:
    """"demo data: ..." when any of ``data`` (the run's data paths) lies in one of the family manifest's
    ``demo_data`` folders (in this checkout or the same relative place under the working folder, for a copied
    workflow), or any of ``models`` is served by an embedded (``kind: local``) endpoint; else None."""
    from ..config import REPO_ROOT

    folders = [Path(f).resolve() for f in family.demo_data]
    folders += [Path.cwd() / f.relative_to(REPO_ROOT) for f in folders if f.is_relative_to(REPO_ROOT)]
    for p in data:
        if p and any(Path(p).resolve().is_relative_to(f) for f in folders):
            return f"demo data: {Path(p).name}"
    local = [m for m in models if m and config.endpoint_of(m).kind == "local"]
    return f"demo data: embedded model {local[0]}" if local else None


def read_input(ctx: StageContext, name: str) -> pd.DataFrame:
    """The stage input ``name`` as a frame; empty when not given, missing or empty (an optional analysis off)."""
    path = ctx.inputs.get(name)
    if not path or not Path(path).is_file():
        return pd.DataFrame()
    try:
        return pd.read_csv(path)
    except pd.errors.EmptyDataError:
        return pd.DataFrame()


def exact_estimate(value: float, row: pd.Series, n: int | None = None) -> Estimate:
    """A number the data give exactly (a count, a mean), in ``row``'s unit: its interval is the printed
    rounding, so it is within when it rounds to the reported value at the reported decimals."""
    half = 0.5 * 10.0 ** -int(row["decimals"])
    return Estimate(float(value), float(value) - half, float(value) + half, n, row["unit"], "exact")


def pearson_estimate(r: float, n: int) -> Estimate | None:
    """Pearson r over n points with its Fisher-z 95% interval; None (not produced) below 4 points or no r."""
    if n is None or pd.isna(r) or int(n) < 4:
        return None
    z, se = math.atanh(max(min(float(r), 1 - 1e-12), -1 + 1e-12)), 1.959963984540054 / math.sqrt(int(n) - 3)
    return Estimate(float(r), math.tanh(z - se), math.tanh(z + se), int(n), "r", "fisher_z")


def bounded(verdicts: pd.DataFrame, ref: pd.DataFrame) -> pd.DataFrame:
    """Verdicts with the reported bounds judged as bounds (column ``bound``: upper / lower / blank)."""
    out = verdicts.copy()
    out["bound"] = [next((b.split()[0] for b in BOUNDS if str(n).startswith(b + ":")), "") for n in ref["note"]]
    for i, r in out.iterrows():
        if r["bound"] and r["verdict"] != NOT_COMPARABLE:
            ok = r["lo"] <= r["reported"] + EDGE if r["bound"] == "upper" else r["hi"] >= r["reported"] - EDGE
            out.at[i, "verdict"] = WITHIN if ok else OUTSIDE
    return out


def verdict_table(reference, lookup, reason: str | None = None) -> pd.DataFrame:
    """Every reference row of the folder with its verdict; with a ``reason`` (demo data) ``lookup`` is not
    called and every row is not comparable."""
    ref = load_reference(reference)
    return bounded(compare(ref, (lambda row: None) if reason else lookup, reason=reason), ref)


def unavailable_first(lookup, models: dict):
    """``lookup``, except that a row of a model marked ``unavailable:`` under the config's ``models:`` is "model
    unavailable: <why>" whichever family asks (the field is the shared schema's)."""
    gone = {m: spec["unavailable"] for m, spec in models.items() if (spec or {}).get("unavailable")}

    def looked(row):
        return f"model unavailable: {gone[row['model']]}" if row["model"] in gone else lookup(row)
    return looked


def write(ctx: StageContext, family: str, reference, lookup, reason: str | None = None) -> pd.DataFrame:
    """The stage's outputs ``verdicts`` and ``findings`` (the paper checked against itself), and the
    family's summary line in the job's log."""
    verdicts = verdict_table(reference, unavailable_first(lookup, ctx.config.raw.get("models") or {}), reason)
    write_csv(ctx, "verdicts", verdicts, reason=reason or "")
    write_csv(ctx, "findings", check_reference(reference))
    print(summary_line(family, verdicts), file=sys.stderr)
    return verdicts
