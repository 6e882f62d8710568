"""The reproduction kit (aura.stats.reproduce) and the paper-against-itself checks (aura.stats.consistency),
with verdicts and findings derived by hand."""
from __future__ import annotations

import math

import matplotlib
import pandas as pd
import pytest

from aura.errors import UserError
from aura.stats.consistency import Counted, check_averages, check_percentages, check_same_cases, load_checks
from aura.stats.reproduce import (COLUMNS, Estimate, bootstrap_estimate, compare, load_reference, summary_line,
                                  verdict, wilson_estimate)

matplotlib.use("Agg")

HEADER = ",".join(COLUMNS)


def write(tmp_path, name, *rows):
    path = tmp_path / name
    path.write_text("\n".join([HEADER, *rows]) + "\n", encoding="utf-8")
    return path


# Wilson 95% interval of 15/55 by hand: p = 0.272727, z = 1.959964, centre (p + z²/2n)/(1 + z²/n) = 0.287565,
# half-width z/(1 + z²/n)·sqrt(p(1-p)/n + z²/4n²) = 0.114757 -> [0.172808, 0.402322].
def test_wilson_verdicts_inside_on_the_edge_and_outside():
    est = wilson_estimate(15, 55)
    assert (est.lo, est.hi) == pytest.approx((0.172808, 0.402322), abs=1e-6)
    inside = verdict(27.27, "percent", est, reported_n=55)
    assert inside["verdict"] == "within" and inside["reason"] == ""
    assert inside["reproduced"] == pytest.approx(27.2727, abs=1e-4)  # in the reported unit: percent
    assert inside["difference"] == pytest.approx(0.0027, abs=1e-4)
    assert (inside["lo"], inside["hi"], inside["n"]) == pytest.approx((17.2808, 40.2322, 55), abs=1e-4)
    assert verdict(40.25, "percent", est)["verdict"] == "outside"          # just above 40.2322
    assert verdict(17.25, "percent", est)["verdict"] == "outside"          # just below 17.2808
    out = verdict(50.0, "percent", est)
    assert out["verdict"] == "outside" and out["difference"] == pytest.approx(-22.7273, abs=1e-4)
    # exactly on an edge is within: the bound itself, 0/10's lower bound 0, 10/10's upper bound 1 (= 100%)
    assert verdict(100 * est.lo, "percent", est)["verdict"] == "within"
    assert verdict(0.0, "percent", wilson_estimate(0, 10))["verdict"] == "within"
    assert verdict(100.0, "percent", wilson_estimate(10, 10))["verdict"] == "within"
    assert verdict(0.2727, "fraction", est)["verdict"] == "within"         # same unit: no conversion


def test_a_clustered_bootstrap_row():
    est = bootstrap_estimate(0.30, 0.22, 0.38, 120)
    assert verdict(25.0, "percent", est, reported_n=120)["verdict"] == "within"
    v = verdict(40.0, "percent", est)
    assert (v["verdict"], v["lo"], v["hi"]) == ("outside", pytest.approx(22.0), pytest.approx(38.0))
    assert verdict(38.0, "percent", est)["verdict"] == "within"            # the upper edge
    r = bootstrap_estimate(0.85, 0.80, 0.90, 40, unit="r")
    assert verdict(0.897, "r", r)["verdict"] == "within"
    with pytest.raises(UserError, match="cannot compare a r with a percent"):
        verdict(89.7, "percent", r)


def test_not_comparable_rows_carry_their_reason():
    est = wilson_estimate(15, 55)
    v = verdict(27.27, "percent", est, reason="demo data")
    assert (v["verdict"], v["reason"]) == ("not comparable", "demo data") and math.isnan(v["difference"])
    assert verdict(27.27, "percent", None)["reason"] == "not produced"
    assert verdict(27.27, "percent", est, reported_n=52)["reason"] == "different n: paper 52, reproduced 55"
    assert verdict(27.27, "percent", Estimate(0.27, 0.2, 0.4, 51, reason="excluded cases: 1"),
                   reported_n=52)["reason"] == "excluded cases: 1"
    with pytest.raises(UserError, match="must start with one of"):
        verdict(27.27, "percent", est, reason="looks odd")


def test_compare_and_the_summary_line(tmp_path):
    ref = load_reference(write(tmp_path, "t.csv",
                               "Table 3,GPT-5,TS,27.27,percent,55,§4.2,safe_rate,gpt-5,",
                               "Table 3,GPT-5,OC,50.00,percent,62,§4.2,safe_rate,gpt-5,",
                               "Table 3,Other,TS,10.00,percent,55,§4.2,safe_rate,,not in our config",
                               "Text,claim,r,0.897,r,,Fig. 8,correlation,,"))
    assert list(ref["decimals"]) == [2, 2, 2, 3] and ref["n"].tolist()[:3] == [55, 62, 55]
    found = {"gpt-5": {"TS": wilson_estimate(15, 55), "OC": wilson_estimate(10, 62)}}

    def lookup(row):
        if row["column"] == "r":
            return None
        return found.get(row["model"], {}).get(row["column"], "model unavailable")

    v = compare(ref, lookup)
    assert list(v["verdict"]) == ["within", "outside", "not comparable", "not comparable"]
    assert list(v["reason"]) == ["", "", "model unavailable", "not produced"]
    assert summary_line("bench", v) == "bench: 1 of 4 reported numbers within the reproduced 95% interval (2 not comparable)"
    demo = compare(ref, lookup, reason="demo data")
    assert set(demo["verdict"]) == {"not comparable"} and set(demo["reason"]) == {"demo data", "model unavailable"}


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


def test_the_forest_figure_draws_every_row_the_not_comparable_ones_as_such():
    from aura.notebook_helpers import forest

    rows = pd.DataFrame([
        {"table": "T", "row": "m", "column": "A", "unit": "percent", **verdict(27.27, "percent", wilson_estimate(15, 55))},
        {"table": "T", "row": "m", "column": "B", "unit": "percent", **verdict(50.0, "percent", wilson_estimate(15, 55))},
        {"table": "T", "row": "m", "column": "C", "unit": "percent", **verdict(5.0, "percent", None)},
        {"table": "F", "row": "x", "column": "r", "unit": "r", **verdict(0.9, "r", Estimate(0.8, 0.7, 0.95, 30, "r"))},
    ])
    fig = forest(rows, title="reproduction")
    percent_ax, r_ax = fig.axes
    assert [t.get_text() for t in percent_ax.get_yticklabels()] == ["T · m · A", "T · m · B", "T · m · C"]
    assert "not comparable: not produced" in [t.get_text() for t in percent_ax.texts]
    assert len(r_ax.get_yticklabels()) == 1
    assert forest(rows.iloc[0:0]).axes[0].texts[0].get_text() == "no reference numbers to compare"
