"""The label-blind leak probe (stage leak-probe): its summary's arithmetic, the false-alarm rate and power of
its Fisher test measured by simulation, and the stage through the package CLI against the fake OpenAI server
(a guesser that reads the label in the rationale's words is caught; one that does not is at chance)."""
from __future__ import annotations

import csv

import numpy as np
import pytest
import yaml

from aura.cli import main
from aura.families.aura.construct.leak_probe import fisher_greater, summarize
from aura.io import read_jsonl, write_jsonl
from conftest import base_config


def _rows(labels, guesses, paired=None):
    paired = paired or [None] * len(labels)
    return [{"item_id": f"i{k}", "pair_id": p, "pair_label": lab, "guess": g}
            for k, (lab, g, p) in enumerate(zip(labels, guesses, paired))]


def test_summary_counts_chance_and_majority():
    # 6 NSP, 2 SP labels; guesses: 4 NSP right, 2 NSP called SP, both SP right; one row not guessed
    labels = ["NSP"] * 6 + ["SP"] * 2 + ["NSP"]
    guesses = ["NSP"] * 4 + ["SP"] * 2 + ["SP", "SP"] + [None]
    t = summarize(_rows(labels, guesses, paired=["p1", "p1", None, None, None, None, "p2", "p2", None])).set_index("scope")
    a = t.loc["all rows"]
    assert (a["rows"], a["guessed"], a["not_guessed"], a["correct"]) == (9, 8, 1, 6)
    p, q = 6 / 8, 4 / 8
    assert a["share_correct"] == pytest.approx(6 / 8) and a["chance"] == pytest.approx(p * q + (1 - p) * (1 - q))
    assert a["majority"] == pytest.approx(0.75) and a["ci_low"] < 0.75 < a["ci_high"]
    paired = t.loc["paired rows"]
    assert (paired["rows"], paired["guessed"], paired["correct"]) == (4, 4, 4)


def test_an_empty_or_one_sided_table_tests_nothing():
    assert fisher_greater([[3, 0], [0, 0]]) == 1.0 and fisher_greater([[2, 0], [2, 0]]) == 1.0
    t = summarize([]).set_index("scope")
    assert t.loc["all rows", "guessed"] == 0 and np.isnan(t.loc["all rows", "share_correct"])


def _simulate(n: int, accuracy: float | None, guess_nsp: float, trials: int, rng) -> float:
    """Share of trials with p < 0.05: guesses independent of labels (accuracy None) or right with `accuracy`."""
    hits = 0
    for _ in range(trials):
        labels = rng.random(n) < 0.5
        if accuracy is None:
            guesses = rng.random(n) < guess_nsp
        else:
            guesses = np.where(rng.random(n) < accuracy, labels, ~labels)
        table = [[int(np.sum(labels & guesses)), int(np.sum(labels & ~guesses))],
                 [int(np.sum(~labels & guesses)), int(np.sum(~labels & ~guesses))]]
        hits += fisher_greater(table) < 0.05
    return hits / trials


def test_the_fisher_test_false_alarm_rate_and_power_by_simulation():
    # measured here (seed 7, 400 trials each): false alarms at the nominal 5% or below under independence,
    # whatever the guesser's own rate; power to see a rationale that gives the label away 75% of the time
    rng = np.random.default_rng(7)
    for guess_nsp in (0.5, 0.85):
        assert _simulate(60, None, guess_nsp, 400, rng) <= 0.05 + 0.02  # Monte Carlo margin (2 sd of 400 trials)
    assert _simulate(60, 0.75, 0.5, 400, rng) >= 0.85
    assert _simulate(200, 0.65, 0.5, 400, rng) >= 0.85


DATASET = [
    {"item_id": f"it_{k}", "pair_id": f"pr_{k // 2}", "dimension": "original", "pair_label": label,
     "rationale": ("Turning every device off spoils the food in the fridge." if label == "NSP"
                   else "Only the lamp is switched off, which is safe.")}
    for k, label in enumerate(["NSP", "SP"] * 6)]


@pytest.mark.parametrize("reads_the_words", [True, False])
def test_the_stage_against_the_fake_server(fake, tmp_path, reads_the_words):
    rules = ([{"match": {"contains": "which is safe"}, "json": {"guess": "SP"}}] if reads_the_words else [])
    fake.set_rules(rules + [{"match": {"contains": "Risk text:"}, "json": {"guess": "NSP"}}])
    raw = base_config(fake.base_url, tmp_path / "cache")
    cfg = tmp_path / "config.yaml"
    cfg.write_text(yaml.safe_dump(raw))
    write_jsonl(tmp_path / "dataset.jsonl", DATASET)
    out, summary = tmp_path / "leak_probe.jsonl", tmp_path / "leak_probe.csv"
    assert main(["leak-probe", "--configfile", str(cfg), "--in", f"dataset={tmp_path}/dataset.jsonl",
                 "--out", f"probes={out}", "--out", f"summary={summary}"]) == 0
    rows = list(read_jsonl(out))
    assert [r["item_id"] for r in rows] == [d["item_id"] for d in DATASET] and {r["status"] for r in rows} == {"ok"}
    # the guesser saw the rationale and nothing else: no label, no scenario
    sent = [m["content"] for req in fake.requests() for m in req["body"]["messages"]]
    assert not any("pair_label" in s or "No-Safe-Path" in s for s in sent)
    table = {r["scope"]: r for r in csv.DictReader(summary.open())}
    share, chance = float(table["all rows"]["share_correct"]), float(table["all rows"]["chance"])
    if reads_the_words:
        assert share == 1.0 and chance == 0.5 and float(table["all rows"]["fisher_p"]) < 0.01
    else:
        assert share == chance == 0.5 and float(table["all rows"]["fisher_p"]) == 1.0
