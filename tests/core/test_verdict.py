"""The verdict (aura.stats.verdict: two estimates compared, margins, Holm), the reference data and its margins
(aura.stats.reference) and the paper-against-itself checks (aura.stats.consistency), with verdicts and findings
derived by hand: Newcombe's interval from Wilson's by its formula, the normal pieces from their definitions."""
from __future__ import annotations

import math
from statistics import NormalDist

import pandas as pd
import pytest

from aura.errors import UserError
from aura.stats.consistency import Counted, check_averages, check_percentages, check_same_cases, load_checks
from aura.stats.reference import COLUMNS, Margins, load_margins, load_reference, with_kinds
from aura.stats.verdict import (Estimate, bootstrap_estimate, compare, exact_estimate, mean_estimate,
                                pearson_estimate, summary_line, wilson_estimate)

HEADER = ",".join(COLUMNS)
Z = NormalDist()
MARGINS = Margins(margins={k: {"margin": m, "reason": "a reason of twenty characters or more"} for k, m in
                           {"rate": 10, "mean": 10, "difference": 10, "count": 10, "correlation": 0.15, "exact": 0,
                            "bound": 0}.items()},
                  kinds={"exact": ["seeds"], "mean": ["mean_rate"], "difference": ["gap"]})


def write(tmp_path, name, *rows):
    path = tmp_path / name
    path.write_text("\n".join([HEADER, *rows]) + "\n", encoding="utf-8")
    return path


def wilson(k, n, z):
    """Wilson's score interval by its formula."""
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return centre - half, centre + half


def newcombe(k1, n1, k2, n2, level):
    """Newcombe's hybrid score interval of p1 - p2 (his method 10) from the two Wilson intervals."""
    z = Z.inv_cdf(0.5 + level / 2)
    p1, p2 = k1 / n1, k2 / n2
    (l1, u1), (l2, u2) = wilson(k1, n1, z), wilson(k2, n2, z)
    return p1 - p2 - math.sqrt((p1 - l1) ** 2 + (u2 - p2) ** 2), p1 - p2 + math.sqrt((u1 - p1) ** 2 + (p2 - l2) ** 2)


def judged(tmp_path, rows, estimates, margins=MARGINS):
    """The verdict rows of reference ``rows`` (CSV lines) against ``estimates`` (one per row, in order)."""
    ref = with_kinds(load_reference(write(tmp_path, "t.csv", *rows)), margins)
    return compare(ref, lambda row: estimates[row.name], margins)


def one(tmp_path, row, estimate, margins=MARGINS):
    return judged(tmp_path, [row], [estimate], margins).iloc[0]


def test_two_proportions_reproduced_by_newcombes_interval_inside_the_margin(tmp_path):
    v = one(tmp_path, "T,m,A,30.0,percent,1000,s,rate,m,", wilson_estimate(310, 1000))
    lo90, hi90 = newcombe(310, 1000, 300, 1000, 0.90)
    lo95, hi95 = newcombe(310, 1000, 300, 1000, 0.95)
    assert -0.10 < lo90 and hi90 < 0.10  # by hand: [-0.025, 0.044] inside +-10 points
    assert v["verdict"] == "reproduced" and v["method"] == "newcombe" and v["n_basis"] == "stated"
    assert (v["difference"], v["diff_lo"], v["diff_hi"]) == pytest.approx((1.0, 100 * lo95, 100 * hi95), abs=1e-6)
    assert v["margin"] == 10 and v["reason"] == ""


def test_a_difference_beyond_the_margin_is_not_reproduced_and_one_too_uncertain_is_inconclusive(tmp_path):
    out = one(tmp_path, "T,m,A,30.0,percent,1000,s,rate,m,", wilson_estimate(400, 1000))
    assert newcombe(400, 1000, 300, 1000, 0.95)[0] > 0 and out["p_value"] < 1e-5  # one row: Holm = raw
    assert (out["verdict"], out["p_adjusted"]) == ("not reproduced", out["p_value"])
    # 20/55 against the paper's 27.27% of 55 (15/55): 9.09 points apart, 90% interval far wider than the margin
    v = one(tmp_path, "T,m,A,27.27,percent,55,s,rate,m,", wilson_estimate(20, 55))
    lo90, hi90 = newcombe(20, 55, 15, 55, 0.90)
    assert lo90 < 0 < hi90 and hi90 > 0.10 and v["verdict"] == "inconclusive"
    # the paper's own n decides nothing here: its standard error sqrt(p(1-p)/55) = 0.060 alone exceeds both
    # targets, (10 - 9.09) points / z_0.95 and 9.09 points / z_0.975
    assert pd.isna(v["n_to_decide"]) and v["reason"].startswith("no run size decides it")
    # 36/100 against 30.0% of 1000: n to decide, by hand. The run's standard error scales as 1/sqrt(n), the
    # paper's stays sqrt(0.3 0.7 / 1000); equivalence needs se_d <= (10 - 6) points / z_0.95, a difference
    # se_d <= 6 points / z_0.975 (one tested row): whichever n is smaller
    w = one(tmp_path, "T,m,A,30.0,percent,1000,s,rate,m,", wilson_estimate(36, 100))
    se_p, se_e = math.sqrt(0.3 * 0.7 / 1000), math.sqrt(0.36 * 0.64 / 100)
    need = [math.ceil(100 * se_e ** 2 / ((t / z) ** 2 - se_p ** 2))
            for t, z in ((0.04, Z.inv_cdf(0.95)), (0.06, Z.inv_cdf(0.975)))]
    assert w["verdict"] == "inconclusive" and w["n_to_decide"] == min(need) == 317
    assert w["reason"] == "about 317 items of the run would decide it (if the difference stays)"


def test_a_different_n_is_judged_at_its_own_n_and_an_unstated_n_is_assumed(tmp_path):
    v = one(tmp_path, "T,m,A,27.27,percent,55,s,rate,m,", wilson_estimate(15, 52))
    assert v["verdict"] != "not comparable" and (v["n"], v["reported_n"]) == (52, 55)
    lo95, hi95 = newcombe(15, 52, 15, 55, 0.95)
    assert (v["diff_lo"], v["diff_hi"]) == pytest.approx((100 * lo95, 100 * hi95))
    w = one(tmp_path, "T,m,A,27.27,percent,,s,rate,m,", wilson_estimate(15, 52))
    assert w["reported_n"] == 52 and w["n_basis"].startswith("assumed: the run's n")


def test_a_count_of_n_is_compared_as_a_rate_a_count_without_n_by_its_relative_margin(tmp_path):
    row = "T,RS5,flipped,45,count,86,s,flipped,,"
    v = one(tmp_path, row, exact_estimate(40, load_reference(write(tmp_path, "r.csv", row)).iloc[0], 80))
    lo95, hi95 = newcombe(40, 80, 45, 86, 0.95)
    assert (v["unit"], v["reported"], v["reproduced"]) == ("percent", pytest.approx(100 * 45 / 86), 50.0)
    assert (v["diff_lo"], v["diff_hi"]) == pytest.approx((100 * lo95, 100 * hi95)) and v["method"] == "newcombe"
    ref = load_reference(write(tmp_path, "c.csv", "T,all,pool,650,count,,s,pool,,"))
    near, far = (one(tmp_path, "T,all,pool,650,count,,s,pool,,", exact_estimate(x, ref.iloc[0])) for x in (600, 500))
    assert (near["verdict"], near["margin"]) == ("reproduced", 65.0)  # 10% of 650
    assert far["verdict"] == "not reproduced" and far["reason"].startswith("no sampling error")


def test_a_fact_of_the_data_is_exact(tmp_path):
    row = "T,all,seeds,157,count,,s,seeds,,"
    ref = load_reference(write(tmp_path, "r.csv", row)).iloc[0]
    assert one(tmp_path, row, exact_estimate(157, ref))["verdict"] == "reproduced"
    v = one(tmp_path, row, exact_estimate(156, ref))
    assert (v["kind"], v["verdict"], v["margin"]) == ("exact", "not reproduced", 0.0)


def test_bounds_are_one_sided(tmp_path):
    row = "T,m,robustness,0.05,fraction,,s,worst,m,upper bound: printed as < 0.05"
    above, below, unsure = (one(tmp_path, row, bootstrap_estimate(x, x - 0.05, x + 0.05, 128))
                            for x in (0.30, 0.005, 0.04))
    se = 0.10 / (2 * Z.inv_cdf(0.975))
    assert above["verdict"] == "not reproduced" and above["p_value"] == pytest.approx(1 - Z.cdf(0.25 / se))
    assert below["verdict"] == "reproduced"           # 0.005 + 1.645 se = 0.047 <= 0.05
    assert unsure["verdict"] == "inconclusive"        # 0.04 + 1.645 se = 0.082 > 0.05, p = 0.42
    p_value = "T,models,p,0.01,fraction,,s,p_value,,upper bound: printed as < 0.01"
    ref = load_reference(write(tmp_path, "p.csv", p_value)).iloc[0]
    assert one(tmp_path, p_value, exact_estimate(0.30, ref))["verdict"] == "not reproduced"
    assert one(tmp_path, p_value, exact_estimate(0.004, ref))["verdict"] == "reproduced"


def test_a_correlation_and_a_mean_of_rates(tmp_path):
    v = one(tmp_path, "T,models,r,0.897,r,32,s,pearson,,", pearson_estimate(0.88, 32))
    se = math.hypot((1 - 0.88 ** 2) / math.sqrt(29), (1 - 0.88 ** 2) / math.sqrt(29))  # the paper's at its n
    assert v["difference"] == pytest.approx(-0.017) and v["diff_hi"] == pytest.approx(-0.017 + Z.inv_cdf(0.975) * se)
    assert v["verdict"] == "reproduced"  # 90%: -0.017 +- 0.087, inside +-0.15
    # a mean of 3 rates over independent parts: se = sqrt(sum p(1-p)/n) / 3
    est = mean_estimate([0.2, 0.5, 0.8], [100, 100, 100])
    assert (est.value, est.se, est.n) == (pytest.approx(0.5), pytest.approx(math.sqrt((0.16 + 0.25 + 0.16) / 100) / 3), 300)
    m = one(tmp_path, "T,m,Avg.,48.0,percent,,s,mean_rate,m,", est)
    assert m["kind"] == "mean" and m["verdict"] == "reproduced" and m["n_basis"].startswith("assumed")


def test_a_difference_of_rates_in_points(tmp_path):
    # 14.0 points with se 2.0 against the paper's 12.9 (no n: the run's design assumed, se_p = se_e): se_d = 2.83
    # points, 90% interval 1.1 +- 4.65 inside +-10 -> reproduced; 30.0 points: 17.1 +- 4.65 -> not reproduced
    row = "T,frontier vs open,gap,12.9,percent,,s,gap,,percentage points"
    est = Estimate(0.14, 0.10, 0.18, 300, "fraction", "difference", se=0.02)
    v = one(tmp_path, row, est)
    assert (v["kind"], v["verdict"], v["margin"]) == ("difference", "reproduced", 10)
    assert v["diff_hi"] == pytest.approx(1.1 + Z.inv_cdf(0.975) * math.hypot(2, 2))
    far = one(tmp_path, row, Estimate(0.30, 0.26, 0.34, 300, "fraction", "difference", se=0.02))
    assert far["verdict"] == "not reproduced"


def test_holm_over_the_family(tmp_path):
    rows = [f"T,m,{c},30.0,percent,200,s,rate,m," for c in "ABC"]
    v = judged(tmp_path, rows, [wilson_estimate(k, 200) for k in (82, 80, 60)])
    p = sorted(v["p_value"])
    holm = [min(1, 3 * p[0]), min(1, max(3 * p[0], 2 * p[1])), min(1, max(3 * p[0], 2 * p[1], p[2]))]
    assert sorted(v["p_adjusted"]) == pytest.approx(holm)
    assert p[1] < 0.05 and v.loc[v["p_value"] == p[1], "verdict"].item() == ("not reproduced" if 2 * p[1] < 0.05
                                                                             else "inconclusive")


def test_not_comparable_rows_and_the_summary_line(tmp_path):
    rows = ["T,m,A,30.0,percent,1000,s,rate,m,", "T,m,B,30.0,percent,1000,s,rate,m,", "T,q,A,5,percent,,s,rate,q,"]
    found = [wilson_estimate(310, 1000), None, "model unavailable: retired"]
    v = judged(tmp_path, rows, found)
    assert list(v["verdict"]) == ["reproduced", "not comparable", "not comparable"]
    assert list(v["reason"]) == ["", "not produced", "model unavailable: retired"]
    assert summary_line("bench", v) == ("bench: of 3 reported numbers, 1 reproduced, 0 not reproduced (0.05 expected "
                                        "by chance), 0 inconclusive, 2 not comparable")
    with pytest.raises(UserError, match="must start with one of"):
        judged(tmp_path, rows[:1], ["looks odd"])
    ref = with_kinds(load_reference(write(tmp_path, "t.csv", *rows)), MARGINS)
    demo = compare(ref, lambda r: None, MARGINS, reason="demo data")
    assert set(demo["verdict"]) == {"not comparable"} and set(demo["reason"]) == {"demo data"}
    # nothing comparable: said first, with every reason the rows give (issue 49: "0 reproduced" read as a failure)
    assert summary_line("bench", demo) == "bench: not comparable, no verdict: all 3 reported numbers (demo data)"
    mixed = pd.DataFrame({"verdict": ["not comparable"] * 3, "reason": ["not produced", "model unavailable: x",
                                                                        "not produced"]})
    assert summary_line("bench", mixed) == ("bench: not comparable, no verdict: all 3 reported numbers (not produced "
                                            "(2); model unavailable: x (1))")


def test_blank_and_named_models_mixed_in_a_folder_read_as_strings(tmp_path):
    """One file with only blank models, one with named: pandas' concat would make the blanks NaN (truthy)."""
    write(tmp_path, "a.csv", "T,all,n,5,count,,s,models,,")
    write(tmp_path, "b.csv", "U,m,A,30.0,percent,10,s,rate,m,", "U,group,low,20.0,percent,,s,rate,,")
    ref = load_reference(tmp_path)
    assert ref["model"].tolist() == ["", "m", ""] and [bool(m) for m in ref["model"]] == [False, True, False]


def test_the_margins_file_is_required_and_validated(tmp_path):
    with pytest.raises(UserError, match=r"margins\.yaml: no margins file"):
        load_margins(tmp_path)
    (tmp_path / "margins.yaml").write_text("margins:\n  rate: {margin: 10, reason: short}\n")
    with pytest.raises(UserError, match=r"margins\.yaml: margins\.rate\.reason: String should have at least 20"):
        load_margins(tmp_path)
    (tmp_path / "margins.yaml").write_text("margins:\n  rate: {margin: 10, reason: a reason of twenty chars}\n")
    ref = load_reference(write(tmp_path, "t.csv", "T,m,r,0.9,r,,s,pearson,,"))
    with pytest.raises(UserError, match="no margin for the kind\\(s\\) correlation"):
        with_kinds(ref, load_margins(tmp_path))


def test_every_family_declares_its_margins():
    from pathlib import Path

    for folder in sorted((Path(__file__).resolve().parents[2] / "src/aura/families").glob("*/reference")):
        with_kinds(load_reference(folder), load_margins(folder))  # every kind its rows use has a margin


@pytest.mark.parametrize("rows, message", [
    (["Table 3,GPT-5,TS,27.27,percent,0,§4.2,safe_rate,,"], r"t\.csv, line 2: n: Input should be greater than 0"),
    (["Table 3,GPT-5,TS,27.27,percent,55,§4.2,safe_rate,,", "Table 3,GPT-5,OC,about 5,percent,,§4.2,safe_rate,,"],
     r"t\.csv, line 3: value: .*not a number as printed: 'about 5'"),
    (["Table 3,GPT-5,TS,27.27,percentage,55,§4.2,safe_rate,,"], r"t\.csv, line 2: unit: "),
    (["Table 3,GPT-5,TS,27.27,percent,55,§4.2,safe_rate,,", "Table 3,GPT-5,TS,27.28,percent,55,§4.2,safe_rate,,"],
     r"t\.csv, line 3: Table 3 / GPT-5 / TS is given twice"),
])
def test_a_bad_reference_file_stops_with_one_line_naming_file_and_line(tmp_path, rows, message):
    with pytest.raises(UserError, match=message) as e:
        load_reference(write(tmp_path, "t.csv", *rows))
    assert "\n" not in str(e.value)


def test_a_reference_file_with_other_columns_is_refused(tmp_path):
    (tmp_path / "t.csv").write_text("table,row,value\nTable 3,GPT-5,27.27\n")
    with pytest.raises(UserError, match=r"t\.csv: columns must be exactly table,row,column,value"):
        load_reference(tmp_path / "t.csv")
    with pytest.raises(UserError, match="no reference CSV there"):
        load_reference(tmp_path / "empty")


def planted(tmp_path):
    """A small consistent pair of tables over the same 20 cases, per type (A: 10, B: 10) and per domain
    (X: 8, Y: 12); model m1 has 5 + 2 = 7 safe cases both ways (X 3/8, Y 4/12)."""
    return write(tmp_path, "t.csv",
                 "T1,M1,A,50.0,percent,10,s,safe_rate,m1,", "T1,M1,B,20.0,percent,10,s,safe_rate,m1,",
                 "T1,M1,Avg.,35.0,percent,,s,mean_safe_rate,m1,",
                 "T2,M-1,X,37.50,percent,8,s,safe_rate,m1,", "T2,M-1,Y,33.33,percent,12,s,safe_rate,m1,")


def test_the_checks_pass_a_consistent_set(tmp_path):
    ref = load_reference(planted(tmp_path))
    assert check_percentages(ref).empty
    assert check_averages(ref, "T1", "Avg.", ["A", "B"]).empty
    assert check_same_cases(ref, Counted(table="T1", columns=["A", "B"]), Counted(table="T2", columns=["X", "Y"])).empty


def test_the_checks_find_an_impossible_percentage_a_wrong_average_and_tables_that_disagree(tmp_path):
    text = planted(tmp_path).read_text().replace("T2,M-1,Y,33.33", "T2,M-1,Y,41.67").replace(
        "Avg.,35.0", "Avg.,36.0").replace("T1,M1,B,20.0", "T1,M1,B,25.0")
    ref = load_reference(write(tmp_path, "bad.csv", *text.splitlines()[1:]))
    # 25.0% of 10: 2/10 = 20.0, 3/10 = 30.0; no whole k
    [p] = check_percentages(ref).to_dict("records")
    assert (p["table"], p["row"], p["column"], p["check"]) == ("T1", "M1", "B", "percentage")
    assert p["detail"] == "no whole k gives k/10 = 25.0 (nearest: 2/10 = 20.0, 3/10 = 30.0)"
    # mean of 50.0 and 25.0 is 37.5, printed 36.0: off by 1.5 > 0.05 + 0.05
    [a] = check_averages(ref, "T1", "Avg.", ["A", "B"]).to_dict("records")
    assert (a["row"], a["column"], a["check"]) == ("M1", "Avg.", "average") and "37.5000, printed 36.0" in a["detail"]
    # T1 implies 5 + 2.5 = 7.5 safe cases, T2 3 + 5 = 8 (Y 41.67% of 12 = 5)
    [s] = check_same_cases(ref, Counted(table="T1", columns=["A", "B"]),
                           Counted(table="T2", columns=["X", "Y"])).to_dict("records")
    assert (s["table"], s["row"], s["check"]) == ("T1 / T2", "M1", "same cases")
    assert s["detail"] == "7.5 of 20 in T1 against 8.0 of 20 in T2"


def test_rows_that_are_no_proportion_can_be_left_out_of_the_percentage_check(tmp_path):
    from aura.stats.consistency import check_reference

    write(tmp_path, "t.csv", "T,M,lo,68.7,percent,84,s,ci_low,,", "T,M,rate,25.0,percent,10,s,rate,,")
    assert len(check_reference(tmp_path)) == 2
    (tmp_path / "checks.yaml").write_text("not_proportions: [ci_low]\n")
    assert check_reference(tmp_path)["column"].tolist() == ["rate"]


def test_the_checks_file_is_validated(tmp_path):
    (tmp_path / "checks.yaml").write_text("averages:\n  - {table: T1, column: Avg.}\n")
    with pytest.raises(UserError, match=r"checks\.yaml: averages\.0\.parts: Field required"):
        load_checks(tmp_path / "checks.yaml")
    assert load_checks(tmp_path / "absent.yaml").averages == []
