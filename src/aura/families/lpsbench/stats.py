"""Stage lpsbench-stats: the Safe Rate tables (paper Tables 3 and 4) and the mitigation effect (Fig. 6) as CSVs.

Inputs (``--in``): ``cases`` (cases.jsonl: case_id, risk, domain) and the evaluator's rows of every
(model, variant) run, ``evaluations_0, evaluations_1, ...`` (or one ``evaluations``). Outputs (``--out``, all
three required): ``safe_rate_by_risk``, ``safe_rate_by_domain``, ``mitigation``. Definitions: ``safe_rate``.

Every input row is checked before anything is computed (a malformed one stops the stage with one line naming
the file and the record), and every table is computed before any is written; each CSV is written atomically
with its provenance. No evaluation row, one variant only, or no case gives well-formed tables (header only, or
rows with empty rates and a note), never a crash.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

from aura.config import UserError
from aura.io import read_jsonl
from aura.pipeline.context import StageContext
from aura.stats.tables import write_csv

from . import safe_rate as SR

OUTPUTS = ("safe_rate_by_risk", "safe_rate_by_domain", "mitigation")


class LpsStatsError(UserError):
    """A malformed input record: one line naming the file and the record."""


def _read(path: Path) -> list[dict]:
    try:
        rows = list(read_jsonl(path))
    except (OSError, ValueError) as exc:
        raise LpsStatsError(f"{path}: cannot read: {' '.join(str(exc).split())}") from None
    for i, row in enumerate(rows):
        if not isinstance(row, dict):
            raise LpsStatsError(f"{path}: record {i + 1}: not a JSON object")
    return rows


def _where(path: Path, i: int, row: dict) -> str:
    return f"{path}: record {i + 1} (case {row.get('case_id')!r})"


def read_cases(path: Path) -> pd.DataFrame:
    rows = _read(path)
    for i, row in enumerate(rows):
        missing = [k for k in ("case_id", "risk", "domain") if k not in row]
        if missing:
            raise LpsStatsError(f"{_where(path, i, row)}: missing field(s) {missing}")
        if row["risk"] not in SR.RISK_ORDER:
            raise LpsStatsError(f"{_where(path, i, row)}: risk = {row['risk']!r}, expected one of {list(SR.RISK_ORDER)}")
        if "benign" in row and row["benign"] is not (SR.group_of(row["risk"]) == "benign"):
            raise LpsStatsError(f"{_where(path, i, row)}: benign = {row['benign']!r} but risk {row['risk']} is "
                                f"{SR.group_of(row['risk'])}")
    cases = pd.DataFrame(rows, columns=["case_id", "risk", "domain"]) if rows else \
        pd.DataFrame(columns=["case_id", "risk", "domain"])
    if cases["case_id"].duplicated().any():
        raise LpsStatsError(f"{path}: case {cases.loc[cases['case_id'].duplicated(), 'case_id'].iloc[0]!r} twice")
    return cases


def read_evaluations(path: Path, cases: pd.DataFrame) -> list[dict]:
    """The rows of one evaluations file, each checked: known case, status and label that fit together, the
    case's own risk/domain when the row repeats them."""
    rows, known = _read(path), cases.set_index("case_id")
    for i, row in enumerate(rows):
        where = _where(path, i, row)
        missing = [k for k in ("case_id", "model", "variant", "status", "label") if k not in row]
        if missing:
            raise LpsStatsError(f"{where}: missing field(s) {missing}")
        if row["variant"] not in SR.VARIANTS:
            raise LpsStatsError(f"{where}: variant = {row['variant']!r}, expected one of {list(SR.VARIANTS)}")
        if row["status"] not in SR.STATUSES:
            raise LpsStatsError(f"{where}: status = {row['status']!r}, expected one of {list(SR.STATUSES)}")
        if row["status"] == "ok" and row["label"] not in SR.LABELS:
            raise LpsStatsError(f"{where}: status ok with label {row['label']!r}, expected one of {list(SR.LABELS)}")
        if row["case_id"] not in known.index:
            raise LpsStatsError(f"{where}: case {row['case_id']!r} is not in the cases file")
        case = known.loc[row["case_id"]]
        for key in ("risk", "domain"):
            if key in row and row[key] != case[key]:
                raise LpsStatsError(f"{where}: {key} = {row[key]!r} but the cases file says {case[key]!r}")
    return rows


def _names(ctx: StageContext, prefix: str) -> list[str]:
    return [n for n in ctx.inputs if n == prefix or (n.startswith(prefix + "_") and n[len(prefix) + 1:].isdigit())]


def run(ctx: StageContext) -> None:
    unknown = sorted(set(ctx.outputs) - set(OUTPUTS))
    if unknown:
        raise UserError(f"unknown --out name(s) {unknown}; this stage writes {list(OUTPUTS)}")
    absent = [name for name in OUTPUTS if name not in ctx.outputs]
    if absent:
        raise UserError(f"missing --out {', '.join(absent)} (this stage writes all of {list(OUTPUTS)})")
    if "cases" not in ctx.inputs:
        raise UserError("missing --in cases=<cases.jsonl>")
    cases = read_cases(ctx.inputs["cases"])
    rows = [r for name in _names(ctx, "evaluations") for r in read_evaluations(ctx.inputs[name], cases)]
    evaluations = pd.DataFrame(rows, columns=["case_id", "model", "variant", "status", "label"]) if rows else \
        pd.DataFrame(columns=["case_id", "model", "variant", "status", "label"])
    dup = evaluations.duplicated(["model", "variant", "case_id"])
    if dup.any():
        first = evaluations.loc[dup, ["model", "variant", "case_id"]].iloc[0].to_dict()
        raise LpsStatsError(f"evaluations: the same model/variant/case twice, e.g. {first}")
    tables = SR.compute(cases, evaluations)
    if evaluations.empty:
        print("lpsbench-stats: no evaluation row: every table is empty", file=sys.stderr)
    for name in OUTPUTS:
        write_csv(ctx, name, tables[name])
