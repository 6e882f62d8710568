"""Human validation of the judges (paper §6 Table 3, Appendix F.1-F.2 Tables 20-22).

Input: `paths.human_labels`, a CSV with columns model, item_id, axis, annotator, label; one row
per annotator label. A unit is one (model, item, axis). An optional row with annotator
`reference` gives the unit's final adjudicated label (F.1.2); otherwise the reference is the
annotators' strict majority, and a unit without one has no reference. `reference` rows never
count as an annotator.

- Table 3 / Table 20 (per axis and overall): N units, human P_o and Krippendorff's alpha, the
  annotators' unanimous / majority / tied counts; N_p = units with a reference and a judge-panel
  plurality (a unique most common vote; a missing vote competes but never wins); Acc. = plurality
  vs reference on N_p with a Wilson 95% CI; Unan. = the same on the N_p units where every judge
  gave the same label.
- Tables 21-22 (`judge_accuracy`): each judge's own label vs the reference, per axis and overall,
  and stratified by the panel's consensus on the unit (unanimous / majority / tied).
- Table 23 (`ensemble_sensitivity`, with a validation panel of more than three judges): every
  3-judge subset and the full panel, with N_p, N_u (unanimous within N_p), accuracy on N_p and T
  (tied units).

The votes come from `aura.roles.validation_judges` when it is set (the paper's 5-judge validation
panel, judged on the human-labelled items by the `judge_validation` rule), else from the scoring
panel (`aura.roles.judges`).
"""
from __future__ import annotations

import csv
import io
from collections import Counter
from itertools import combinations
from pathlib import Path

import pandas as pd
from statsmodels.stats.proportion import proportion_confint

from aura.config import UserError
from aura.io import read_utf8
from aura.stats.agreement import agreement_row, pooled

from ..evaluate.schemas import LABELS

COLUMNS = ("model", "item_id", "axis", "annotator", "label")
REFERENCE = "reference"


class HumanLabelError(UserError):
    """The human-label file cannot be used (one line: file, row and item)."""


def read_human_labels(path: Path) -> pd.DataFrame:
    """The human-label CSV, checked: a clear one-line error names the file and the offending row."""
    text = read_utf8(path, HumanLabelError, "human labels")
    header = next(csv.reader(io.StringIO(text)), [])
    repeated = sorted({c for c in header if header.count(c) > 1})
    if repeated:
        raise HumanLabelError(f"{path}: column(s) {repeated} given twice in the header")
    try:
        df = pd.read_csv(io.StringIO(text), dtype=str, keep_default_na=False)
    except (pd.errors.EmptyDataError, pd.errors.ParserError) as exc:
        reason = " ".join(str(exc).split())
        raise HumanLabelError(f"{path}: cannot read human labels: {reason}") from None
    missing = [c for c in COLUMNS if c not in df.columns]
    if missing:
        raise HumanLabelError(f"{path}: missing column(s) {missing}; expected {list(COLUMNS)}")
    for i, r in df.iterrows():
        where = f"{path}: row {i + 2} (item_id {r['item_id']!r})"
        empty = [c for c in ("model", "item_id", "annotator") if not r[c].strip()]
        if empty:
            raise HumanLabelError(f"{where}: empty {', '.join(empty)}")
        if r["axis"] not in LABELS:
            raise HumanLabelError(f"{where}: unknown axis {r['axis']!r}; expected one of {list(LABELS)}")
        if r["label"] not in LABELS[r["axis"]]:
            raise HumanLabelError(f"{where}: label {r['label']!r} is not a {r['axis']} label {LABELS[r['axis']]}")
    dup = df.duplicated(["model", "item_id", "axis", "annotator"])
    if dup.any():
        r = df[dup].iloc[0]
        raise HumanLabelError(f"{path}: row {dup.idxmax() + 2}: annotator {r['annotator']!r} labels item_id {r['item_id']!r} ({r['axis']}) twice")
    return df


def strict_majority(labels: list[str]) -> str | None:
    if not labels:
        return None
    label, n = Counter(labels).most_common(1)[0]
    return label if n > len(labels) / 2 else None


def plurality(labels: list[str | None]) -> str | None:
    """The unique most common label; a missing vote (None) competes but never wins."""
    counts = Counter(labels).most_common()
    if not counts or (len(counts) > 1 and counts[0][1] == counts[1][1]):
        return None
    return counts[0][0]


def consensus(labels: list[str | None]) -> str:
    """unanimous (every vote, the same label) / majority (a plurality, not unanimous) / tied;
    `none` when there is no vote at all (never judged, or only a reference row)."""
    if not labels:
        return "none"
    if None not in labels and len(set(labels)) == 1:
        return "unanimous"
    return "majority" if plurality(labels) is not None else "tied"


def units(human: pd.DataFrame, panel: list[dict], judges: list[str]) -> pd.DataFrame:
    """One row per human-labelled unit: annotator labels, reference, consensus, and the judges' votes.

    `judges` is the voting panel (the validation panel, else `aura.roles.judges`; distinct models, the
    schema's uniqueItems), in order: a missing (unparsed/failed) vote is kept as None, as the
    panel's majority rule counts it. `judged` is False for a unit no judge was asked about (its rollout
    failed, or the item is not among the judged rollouts): such units are counted, never scored."""
    votes = {(r["model"], r["item_id"], axis): r.get(f"{axis}_votes") or {}
             for r in panel if r["rollout_status"] == "ok" for axis in LABELS}
    rows = []
    for (model, item, axis), g in human.groupby(["model", "item_id", "axis"], sort=True):
        annot = g[g["annotator"] != REFERENCE]
        ref_rows = g.loc[g["annotator"] == REFERENCE, "label"]
        labels = list(annot["label"])
        given = votes.get((model, item, axis), {})
        by_judge = {j: v for j, v in given.items() if v is not None}
        judged = [given.get(j) for j in judges] if given else []
        rows.append({"model": model, "item_id": item, "axis": axis, "annotators": list(annot["annotator"]),
                     "labels": labels, "human_consensus": consensus(labels),
                     "reference": ref_rows.iloc[0] if len(ref_rows) else strict_majority(labels),
                     "judge_votes": by_judge, "panel_plurality": plurality(judged),
                     "panel_consensus": consensus(judged), "panel_unanimous": consensus(judged) == "unanimous",
                     "judged": bool(given)})
    return pd.DataFrame(rows, columns=["model", "item_id", "axis", "annotators", "labels", "human_consensus", "reference",
                                       "judge_votes", "panel_plurality", "panel_consensus", "panel_unanimous", "judged"])


def _accuracy(hits: int, n: int) -> dict:
    lo, hi = proportion_confint(hits, n, alpha=0.05, method="wilson") if n else (float("nan"), float("nan"))
    return {"agree": hits, "acc": hits / n if n else float("nan"), "acc_ci_low": lo, "acc_ci_high": hi}


def _ratings(part: pd.DataFrame) -> pd.DataFrame:
    rows = [{"unit": f"{u.model}|{u.item_id}", "rater": a, "label": lab}
            for u in part.itertuples(index=False) for a, lab in zip(u.annotators, u.labels)]
    return pd.DataFrame(rows, columns=["unit", "rater", "label"])


def _table3_row(axis: str, part: pd.DataFrame, ratings: pd.DataFrame) -> dict:
    scored = part[part["reference"].notna() & part["panel_plurality"].notna()]
    hits = scored["panel_plurality"] == scored["reference"]
    unan = scored["panel_unanimous"]
    return {"axis": axis, "N": len(part), **agreement_row(ratings),
            **{f"human_{c}": int((part["human_consensus"] == c).sum()) for c in ("unanimous", "majority", "tied")},
            "no_reference": int(part["reference"].isna().sum()), "not_judged": int((~part["judged"].astype(bool)).sum()),
            "N_p": len(scored), **_accuracy(int(hits.sum()), len(scored)),
            "N_unanimous": int(unan.sum()), "agree_unanimous": int((hits & unan).sum()),
            "acc_unanimous": float((hits & unan).sum() / unan.sum()) if unan.sum() else float("nan")}


def human_validation(human: pd.DataFrame, panel: list[dict], judges: list[str]) -> pd.DataFrame:
    """Table 3 (with Table 20's human agreement strata): per axis and overall."""
    u = units(human, panel, judges)
    per_axis = {axis: _ratings(u[u["axis"] == axis]) for axis in LABELS}
    rows = [_table3_row(axis, u[u["axis"] == axis], per_axis[axis]) for axis in LABELS]
    rows.append(_table3_row("overall", u, pooled(per_axis)))
    return pd.DataFrame(rows)


def judge_accuracy(human: pd.DataFrame, panel: list[dict], judges: list[str]) -> pd.DataFrame:
    """Tables 21-22: each judge's label vs the reference, by axis (stratum all) and by panel consensus.

    Denominator: the judged units with a reference; a judge's missing (unparsed/failed) vote counts
    as a miss and is also counted in `missing`."""
    u = units(human, panel, judges)
    u = u[u["reference"].notna() & u["judged"].astype(bool)]
    rows = []
    for judge in dict.fromkeys(judges):
        for axis in [*LABELS, "overall"]:
            part = u if axis == "overall" else u[u["axis"] == axis]
            for stratum in ("all", "unanimous", "majority", "tied"):
                sub = part if stratum == "all" else part[part["panel_consensus"] == stratum]
                said = [v.get(judge) for v in sub["judge_votes"]]
                hits = sum(a == b for a, b in zip(said, sub["reference"]))
                rows.append({"judge": judge, "axis": axis, "stratum": stratum, "units": len(sub),
                             "missing": sum(a is None for a in said), **_accuracy(hits, len(sub))})
    return pd.DataFrame(rows, columns=["judge", "axis", "stratum", "units", "missing", "agree", "acc", "acc_ci_low",
                                       "acc_ci_high"])


def validation_panel(judgments: list[dict]) -> list[dict]:
    """Panel-like rows (one per model and item, `<axis>_votes`) from the validation judges' judgments."""
    rows: dict[tuple, dict] = {}
    for j in judgments:
        row = rows.setdefault((j["model"], j["item_id"]),
                              {"model": j["model"], "item_id": j["item_id"], "rollout_status": "ok"})
        row.setdefault(f"{j['axis']}_votes", {})[j["judge"]] = j["label"] if j["status"] == "ok" else None
    return list(rows.values())


def ensemble_sensitivity(human: pd.DataFrame, panel: list[dict], judges: list[str], scoring: list[str]) -> pd.DataFrame:
    """Table 23: every 3-judge subset of the validation panel and the full panel, on the units with a reference."""
    u = units(human, panel, judges)
    not_judged = int((~u["judged"].astype(bool)).sum())
    u = u[u["reference"].notna() & u["judged"].astype(bool)]
    pool = list(dict.fromkeys(judges))
    rows = []
    for size in sorted({3, len(pool)}) if len(pool) >= 3 else []:
        for combo in combinations(pool, size):
            n_p = hits = n_u = ties = 0
            for votes, ref in zip(u["judge_votes"], u["reference"]):
                given = [votes.get(j) for j in combo]
                label = plurality(given)
                if label is None:
                    ties += 1
                    continue
                n_p, hits, n_u = n_p + 1, hits + (label == ref), n_u + (consensus(given) == "unanimous")
            rows.append({"ensemble": " + ".join(combo), "size": size, "units": len(u), "N_p": n_p, "N_u": n_u,
                         **_accuracy(hits, n_p), "T": ties, "not_judged": not_judged,
                         "scoring_panel": set(combo) == set(scoring)})
    columns = ["ensemble", "size", "units", "N_p", "N_u", "agree", "acc", "acc_ci_low", "acc_ci_high", "T", "not_judged",
               "scoring_panel"]
    return pd.DataFrame(rows, columns=columns).sort_values(["size", "acc"], ascending=[False, False], ignore_index=True)
