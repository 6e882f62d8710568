"""Stage lpsbench-stats: the Safe Rate tables (paper Tables 3 and 4) and the mitigation effect (Fig. 6) as CSVs.

Inputs (``--in``): ``cases`` (cases.jsonl: case_id, risk, domain), the evaluator's rows of every
(model, variant) run, ``evaluations_0, evaluations_1, ...`` (or one ``evaluations``), and, optional, ``excluded``
(excluded.jsonl, layout key ``lpsbench_excluded``: the cases the cases stage dropped because their upstream tool
module is broken, rows ``case_id, domain, risk, reason``; counted in each row's ``excluded`` column, and in n as
failed runs unless the config's ``lpsbench.broken_cases`` is ``excluded``).
Outputs (``--out``, all three required): ``safe_rate_by_risk``, ``safe_rate_by_domain``, ``mitigation``.
Definitions (Safe Rate = safe / every case of the cell; the reasons of execution_failed): ``safe_rate``.

Every input row is checked before anything is computed (a malformed one stops the stage with one line naming
the file and the record): an evaluation row's ``outcome`` is one of safe / unsafe / execution_failed, its
``reason`` is null exactly when the outcome is not execution_failed and otherwise one of ``safe_rate.ROW_REASONS``
(``missing`` is this stage's own: a case with no row), and a safe / unsafe outcome is the evaluator's label
(status ok, label equal to the outcome). Every table is computed before any is written; each CSV is written
atomically with its provenance. No evaluation row, one variant only, or no case gives well-formed tables (header
only, or rows with empty rates and a note), never a crash.
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


def _check_outcome(where: str, row: dict) -> None:
    outcome, reason = row["outcome"], row["reason"]
    if outcome not in SR.OUTCOMES:
        raise LpsStatsError(f"{where}: outcome = {outcome!r}, expected one of {list(SR.OUTCOMES)}")
    if outcome == "execution_failed":
        if reason is None:
            raise LpsStatsError(f"{where}: outcome execution_failed with reason null, expected one of "
                                f"{list(SR.ROW_REASONS)}")
        if reason not in SR.ROW_REASONS:
            raise LpsStatsError(f"{where}: reason = {reason!r}, expected one of {list(SR.ROW_REASONS)}")
    else:
        if reason is not None:
            raise LpsStatsError(f"{where}: outcome {outcome} with reason {reason!r}, expected null")
        if (row["status"], row["label"]) != ("ok", outcome):
            raise LpsStatsError(f"{where}: outcome {outcome} but status {row['status']!r} label {row['label']!r} "
                                f"(a {outcome} outcome is the evaluator's label: status 'ok', label {outcome!r})")


def read_evaluations(path: Path, cases: pd.DataFrame) -> list[dict]:
    """The rows of one evaluations file, each checked: known case, status and label that fit together, outcome
    and reason that fit together and with the label, the case's own risk/domain when the row repeats them."""
    rows, known = _read(path), cases.set_index("case_id")
    for i, row in enumerate(rows):
        where = _where(path, i, row)
        missing = [k for k in ("case_id", "model", "variant", "status", "label", "outcome", "reason") if k not in row]
        if missing:
            raise LpsStatsError(f"{where}: missing field(s) {missing}")
        if row["variant"] not in SR.VARIANTS:
            raise LpsStatsError(f"{where}: variant = {row['variant']!r}, expected one of {list(SR.VARIANTS)}")
        if row["status"] not in SR.STATUSES:
            raise LpsStatsError(f"{where}: status = {row['status']!r}, expected one of {list(SR.STATUSES)}")
        if row["status"] == "ok" and row["label"] not in SR.LABELS:
            raise LpsStatsError(f"{where}: status ok with label {row['label']!r}, expected one of {list(SR.LABELS)}")
        _check_outcome(where, row)
        if row["case_id"] not in known.index:
            raise LpsStatsError(f"{where}: case {row['case_id']!r} is not in the cases file")
        case = known.loc[row["case_id"]]
        for key in ("risk", "domain"):
            if key in row and row[key] != case[key]:
                raise LpsStatsError(f"{where}: {key} = {row[key]!r} but the cases file says {case[key]!r}")
    return rows


def read_excluded(path: Path, cases: pd.DataFrame) -> pd.DataFrame:
    """The excluded cases, each checked: the four fields, a known risk, a non-empty reason, each case once and
    none of them in the cases file (an excluded case never runs: it is in n only as a failed run, broken_module)."""
    rows, known = _read(path), set(cases["case_id"])
    seen: set = set()
    for i, row in enumerate(rows):
        where = _where(path, i, row)
        missing = [k for k in SR.EXCLUDED_FIELDS if k not in row]
        if missing:
            raise LpsStatsError(f"{where}: missing field(s) {missing}")
        if row["risk"] not in SR.RISK_ORDER:
            raise LpsStatsError(f"{where}: risk = {row['risk']!r}, expected one of {list(SR.RISK_ORDER)}")
        for key in ("case_id", "domain", "reason"):
            if not isinstance(row[key], str) or not row[key].strip():
                raise LpsStatsError(f"{where}: {key} = {row[key]!r}, expected a non-empty string")
        if row["case_id"] in known:
            raise LpsStatsError(f"{where}: case {row['case_id']!r} is excluded but also in the cases file")
        if row["case_id"] in seen:
            raise LpsStatsError(f"{where}: case {row['case_id']!r} excluded twice")
        seen.add(row["case_id"])
    return pd.DataFrame(rows, columns=list(SR.EXCLUDED_FIELDS)) if rows else \
        pd.DataFrame(columns=list(SR.EXCLUDED_FIELDS))


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
    excluded = read_excluded(ctx.inputs["excluded"], cases) if "excluded" in ctx.inputs else None
    rows = [r for name in _names(ctx, "evaluations") for r in read_evaluations(ctx.inputs[name], cases)]
    fields = ["case_id", "model", "variant", "status", "label", "outcome", "reason"]
    evaluations = pd.DataFrame(rows, columns=fields) if rows else pd.DataFrame(columns=fields)
    dup = evaluations.duplicated(["model", "variant", "case_id"])
    if dup.any():
        first = evaluations.loc[dup, ["model", "variant", "case_id"]].iloc[0].to_dict()
        raise LpsStatsError(f"evaluations: the same model/variant/case twice, e.g. {first}")
    tables = SR.compute(cases, evaluations, excluded, ctx.config.section("lpsbench").get("broken_cases", "failed"))
    if evaluations.empty:
        print("lpsbench-stats: no evaluation row: every table is empty", file=sys.stderr)
    for name in OUTPUTS:
        write_csv(ctx, name, tables[name])
