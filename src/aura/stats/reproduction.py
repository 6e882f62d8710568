"""A family's reproduction stage, its shared part: reference rows -> verdict table + the paper's own findings.

A family's stage (thin: ``<family>/reproduction.py``) reads the stats files its run produced, defines
``lookup(row)`` (a reference row -> ``Estimate`` | None | reason string; the estimates come from
``aura.stats.verdict``) and calls ``write(ctx, family, reference_folder, lookup, reason=demo_reason(...))``. This
module gives it:

- ``demo_reason``: "demo data: ..." when the run reads the family's own demo data (a folder its manifest lists
  under ``demo_data``) or a model it names is on an embedded (``kind: local``) endpoint; then every row is
  not comparable and ``lookup`` is never called: the smoke run gets no verdict.
- ``read_input`` (a stats CSV input, empty when absent); ``unavailable_first`` (the config's ``unavailable:``
  models are "model unavailable" in every family);
- ``UNMAPPED``: the start of the reason of a row the family does not map to its run ("not produced: not mapped:
  <why>"); every other row is mapped (``aura.stats.calibration.mapped`` tells them apart, the family's doc lists
  the unmapped ones).

The verdicts themselves (two estimates compared, margins, the multiplicity control) are ``aura.stats.verdict``'s;
the reference data and its margins ``aura.stats.reference``'s. Outputs: ``verdicts`` (``VERDICT_COLUMNS``) and
``findings`` (``consistency.FINDING_COLUMNS``).
"""
from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

from ..pipeline.context import StageContext
from .consistency import average_parts, check_reference, load_checks, with_part_n
from .reference import Margins, load_margins, load_reference, with_kinds
from .tables import write_csv
from .verdict import compare, summary_line

UNMAPPED = "not produced: not mapped: "


def demo_reason(config, family, data=(), models=()) -> str | None:
    """"demo data: ..." when any of ``data`` (the run's data paths) lies in one of the family manifest's
    ``demo_data`` folders (in this checkout or the same relative place under the working folder, for a copied
    workflow), or any of ``models`` is served by an embedded (``kind: local``) endpoint, naming both when both
    hold ("demo data: demo_seeds; embedded model smollm2"); else None."""
    from ..resources import same_places

    folders = same_places(family.demo_data)
    found = [f"demo data: {Path(p).name}" for p in data
             if p and any(Path(p).resolve().is_relative_to(f) for f in folders)][:1]
    local = [m for m in models if m and config.endpoint_of(m).kind == "local"]
    if local:  # the embedded model rules a verdict out too: both reasons are named
        found.append(f"embedded model {local[0]}" if found else f"demo data: embedded model {local[0]}")
    return "; ".join(found) or None


def read_input(ctx: StageContext, name: str) -> pd.DataFrame:
    """The stage input ``name`` as a frame; empty when not given, missing or empty (an optional analysis off)."""
    path = ctx.inputs.get(name)
    if not path or not Path(path).is_file():
        return pd.DataFrame()
    try:
        return pd.read_csv(path)
    except pd.errors.EmptyDataError:
        return pd.DataFrame()


def load_folder(reference, rows=None) -> tuple[pd.DataFrame, Margins, dict]:
    """A reference folder ready for verdicts: its rows with their ``kind`` and an average's n (its parts' summed,
    ``with_part_n``), its margins, and each average's parts (``checks.yaml``). ``rows`` (a boolean mask or index
    list) keeps only those rows, renumbered (the simulation of a family's mapped rows)."""
    margins = load_margins(reference)
    ref = with_kinds(load_reference(reference), margins, Path(reference) / "margins.yaml")
    if rows is not None:
        ref = ref.loc[rows].reset_index(drop=True)
    parts = average_parts(ref, load_checks(Path(reference) / "checks.yaml"))
    return with_part_n(ref, parts), margins, parts


def verdict_table(reference, lookup, reason: str | None = None) -> pd.DataFrame:
    """Every reference row of the folder with its verdict, at the margins of its ``margins.yaml``; with a
    ``reason`` (demo data) ``lookup`` is not called and every row is not comparable."""
    ref, margins, _ = load_folder(reference)
    return compare(ref, (lambda row: None) if reason else lookup, margins, reason=reason)


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
    print(summary_line(family, verdicts, load_margins(reference).alpha, bool(ctx.config.raw.get("rehearsal"))),
          file=sys.stderr)
    return verdicts
