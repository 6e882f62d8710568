"""Stage leak-probe: can a model tell a released row's pair label from its reference risk rationale alone?

The safety judge reads each row's reference risk rationale (paper §5.1), and the rationale is written to name
the scenario's risk only, never the pair label (NSP / SP) nor whether a safe fulfilling action exists. The
literal check at classification (`rationale_label_violation`) catches the label's own words; this probe
catches the label said in other words. The classifier role reads one rationale, and nothing else, and guesses
the label (prompt `leak_probe`); the stage writes every guess (`leak_probe`, JSONL) and a summary
(`leak_probe_summary`, CSV) per scope (all rows, paired rows):

- ``share_correct`` of the rows with a guess, with its Wilson interval;
- ``chance``: the share a guesser gets right when its guesses are independent of the labels, at the same
  rates (p*q + (1-p)*(1-q), p = the NSP share of labels, q = of guesses), and ``majority`` (the larger label
  share, what always guessing one label gets);
- ``fisher_p``: Fisher's exact test, one-sided, that guesses agree with labels more than independence gives
  (scipy). tests/aura/test_leak_probe.py measures its false-alarm rate and power by simulation.

A row whose call failed or whose answer did not parse has no guess: it is listed (status, reason) and counted
(``not_guessed``), and left out of the shares, which are about what a model reads in a rationale.
"""
from __future__ import annotations

import pandas as pd

from aura.pipeline.context import StageContext
from aura.stats.intervals import wilson
from aura.stats.tables import write_csv

from .common import prompt, request

LABELS = ("NSP", "SP")
SCHEMA = {"type": "object", "properties": {"guess": {"enum": list(LABELS)}}, "required": ["guess"],
          "additionalProperties": False}
COLUMNS = ["scope", "rows", "guessed", "not_guessed", "correct", "share_correct", "ci_low", "ci_high", "chance",
           "majority", "label_nsp_share", "guess_nsp_share", "fisher_p"]
SCOPES = {"all rows": lambda r: True, "paired rows": lambda r: bool(r.get("pair_id"))}


def fisher_greater(table: list[list[int]]) -> float:
    """One-sided Fisher exact p that guesses (columns NSP, SP) agree with labels (rows NSP, SP) beyond chance;
    1.0 when a row or column is empty (nothing to test)."""
    from scipy.stats import fisher_exact

    if min(sum(table[0]), sum(table[1]), table[0][0] + table[1][0], table[0][1] + table[1][1]) == 0:
        return 1.0
    return float(fisher_exact(table, alternative="greater").pvalue)


def summarize(rows: list[dict]) -> pd.DataFrame:
    """One summary row per scope from the probe's rows (pair_label, guess, pair_id)."""
    out = []
    for scope, keep in SCOPES.items():
        these = [r for r in rows if keep(r)]
        guessed = [r for r in these if r.get("guess") in LABELS and r.get("pair_label") in LABELS]
        n = len(guessed)
        table = [[sum(r["pair_label"] == a and r["guess"] == b for r in guessed) for b in LABELS] for a in LABELS]
        correct = table[0][0] + table[1][1]
        p = (table[0][0] + table[0][1]) / n if n else float("nan")
        q = (table[0][0] + table[1][0]) / n if n else float("nan")
        lo, hi = wilson(correct, n)
        out.append({"scope": scope, "rows": len(these), "guessed": n, "not_guessed": len(these) - n,
                    "correct": correct, "share_correct": correct / n if n else float("nan"), "ci_low": lo,
                    "ci_high": hi, "chance": p * q + (1 - p) * (1 - q), "majority": max(p, 1 - p),
                    "label_nsp_share": p, "guess_nsp_share": q, "fisher_p": fisher_greater(table) if n else float("nan")})
    return pd.DataFrame(out, columns=COLUMNS)


def run(ctx: StageContext) -> None:
    probe = ctx.use_prompt(prompt("leak_probe"))
    dataset = ctx.read("dataset")
    model = ctx.config.raw["aura"]["roles"]["classifier"]
    reqs = [request(probe, r["item_id"], SCHEMA, "leak_probe", rationale=r.get("rationale") or "") for r in dataset]
    results = []
    if reqs:
        with ctx.llm([model]) as llm:
            results = llm.run("classifier", model, reqs)
    rows = [{"item_id": r["item_id"], "pair_id": r.get("pair_id"), "dimension": r.get("dimension"),
             "pair_label": r["pair_label"], "guess": (res.parsed or {}).get("guess") if res.status == "ok" else None,
             "status": res.status, "reason": res.error} for r, res in zip(dataset, results)]
    ctx.write("probes", rows, model=model)
    write_csv(ctx, "summary", summarize(rows), probes=str(ctx.outputs["probes"]))
