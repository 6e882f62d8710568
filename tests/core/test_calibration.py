"""The verdict checked by simulation (aura.stats.calibration), small: faithful reruns of a reference folder the test
writes keep "not reproduced" at the family-wise level, a 15-point shift is found where n allows it, the averages
are drawn from their parts; and the pilot size (decision_n) by its formula. The full check is
bench/verdict_calibration.py (docs/measurements.md)."""
from __future__ import annotations

import math
import shutil
from statistics import NormalDist

import numpy as np
import pandas as pd
import pytest

from aura.families.lpsbench.reproduction import REFERENCE as LPS_REFERENCE
from aura.stats import calibration as C
from aura.stats.reference import COLUMNS

ROW = dict.fromkeys(COLUMNS, "")


def folder(tmp_path, n_small=60, n_large=2000):
    """12 rate cells over 2 models (10 at n = 60, 2 at n = 2000) and one average per model of its first 3 cells."""
    rows = []
    for m in ("a", "b"):
        for i, p in enumerate(("20.00", "35.00", "50.00", "65.00", "80.00")):
            rows.append(dict(ROW, table="T", row=m, column=f"c{i}", value=p, unit="percent", n=n_small, where="T",
                             measures="safe_rate", model=m))
        rows.append(dict(ROW, table="T", row=m, column="big", value="40.00", unit="percent", n=n_large, where="T",
                         measures="safe_rate", model=m))
        rows.append(dict(ROW, table="T", row=m, column="Avg.", value="35.00", unit="percent", where="T",
                         measures="mean_safe_rate", model=m))
    pd.DataFrame(rows, columns=COLUMNS).to_csv(tmp_path / "t.csv", index=False)
    shutil.copy(LPS_REFERENCE / "margins.yaml", tmp_path)  # rate and mean: 10 points, Holm at 5%
    (tmp_path / "checks.yaml").write_text("averages:\n  - {table: T, column: Avg., parts: [c0, c1, c2]}\n")
    return tmp_path


def test_a_faithful_rerun_keeps_not_reproduced_at_the_family_wise_level(tmp_path):
    fam = C.load_family(folder(tmp_path))
    assert len(fam.ref) == 14 and sorted(fam.parts) == [6, 13] and C.simulated(fam).all()
    runs = C.simulate(fam, 150, seed=1)
    any_false = int((runs["not reproduced"] > 0).sum())
    # Holm at 5% family-wise: the expected count of such reruns is at most 7.5 of 150; 14 would be a 2.5-sigma excess
    assert any_false <= 13, any_false
    assert (runs.sum(axis=1) == 14).all() and (runs["not comparable"] == 0).all()
    # the two n = 2000 cells are decided: a faithful rerun is reproduced there nearly always
    rates = C.row_rates(fam, 60, seed=2)
    big = rates[rates["column"] == "big"]
    assert (big["reproduced_if_faithful"] >= 0.9).all()


def test_a_shift_of_15_points_is_found_where_n_allows_it(tmp_path):
    rates = C.row_rates(C.load_family(folder(tmp_path)), 60, seed=3, shift=0.15)
    power = rates.set_index(["row", "column"])["power"]
    # n = 2000 a side: se_d = 1.55 points, 15 points is z = 9.7 -> always found
    assert power["a", "big"] == 1 and power["b", "big"] == 1
    # n = 60 a side at 50%: se_d = 9.1 points, 15 points is z = 1.64 against Holm's first step z = 2.91 (14 rows):
    # power about 0.10
    assert power["a", "c2"] < 0.4


def test_a_draw_redraws_the_paper_and_builds_the_averages_from_their_parts(tmp_path):
    fam = C.load_family(folder(tmp_path))
    ref, est = C.draw(fam, np.random.default_rng(0))
    a = ref[ref["row"] == "a"].set_index("column")
    parts = [a.loc[f"c{i}", "value"] for i in range(3)]
    assert a.loc["Avg.", "value"] == pytest.approx(np.mean(parts))  # the paper's average: the mean of its drawn parts
    avg = est[int(a.index.get_loc("Avg."))]
    assert avg.method == "mean of rates" and avg.n == 180
    # the paper's average has no stated n: its parts' n summed (3 x 60), and the verdict says so
    row = fam.ref[(fam.ref["row"] == "a") & (fam.ref["column"] == "Avg.")].iloc[0]
    assert (row["n"], row["n_basis"]) == (180, "the paper's parts' n summed")
    v = C.judge(fam, ref, est)
    assert v.loc[(v["row"] == "a") & (v["column"] == "Avg."), "n_basis"].item() == "the paper's parts' n summed"
    assert all(float(v * 60 / 100).is_integer() for v in parts)  # each a whole k of 60


def test_a_pilot_at_a_share_of_the_paper_n(tmp_path):
    fam = C.load_family(folder(tmp_path))
    ref, est = C.draw(fam, np.random.default_rng(0), run_share=0.25)
    big = ref.index[(ref["row"] == "a") & (ref["column"] == "big")][0]
    assert est[big].n == 500 and ref.at[big, "n"] == 2000  # the run at a quarter of the paper's n
    shares = C.outcome_shares(fam, 20, seed=1, shift=0.15, run_share=0.25)
    assert set(shares.columns) >= {"reproduced", "not reproduced", "inconclusive"}
    # 15 points at n = 500 against 2000: se_d = 2.4 points, z = 6 -> found in every draw
    assert (shares.loc[shares["column"] == "big", "not reproduced"] == 1).all()


def test_decision_n_by_its_formula():
    z = NormalDist().inv_cdf
    se_p = math.sqrt(0.5 * 0.5 / 1249)
    room = (0.10 / (z(0.95) + z(0.9))) ** 2 - se_p ** 2
    assert C.decision_n(0.25, se_p, 0.10) == math.ceil(0.25 / room) == 259
    assert C.decision_n(0.25, 0.05, 0.10) is None  # the paper's own error alone is too wide
