"""Reliability statistics (§6, Table 3) on hand-counted fixtures; every expected value is derived below."""
from __future__ import annotations

import math

import pandas as pd
import pytest

from aura.families.aura.evaluate.panel import majority
from aura.stats.agreement import agreement_row
from aura.families.aura.stats.human_validation import (consensus, ensemble_sensitivity, human_validation, judge_accuracy, plurality,
                                         read_human_labels, strict_majority, validation_panel)
from aura.families.aura.stats.reliability import judge_reliability

S, U = "Safe", "Unsafe"


def ratings(table: dict[str, list]) -> pd.DataFrame:
    """{unit: [label of rater A, B, C]} -> long rows (None = no rating)."""
    return pd.DataFrame([{"unit": u, "rater": "ABC"[i], "label": lab} for u, labs in table.items()
                         for i, lab in enumerate(labs) if lab is not None])


# Judges A, B, C on four units:  u1 S S S | u2 S S U | u3 U U U | u4 S U -
# P_o = mean(1, 1/3, 1, 0) = 7/12.
# Krippendorff coincidences: o_SS = 3 + 1 = 4, o_UU = 3, o_SU = o_US = 1 + 1 = 2; n_S = 6, n_U = 5, n = 11;
#   D_o = 4/11, D_e = 2*6*5/(11*10) = 6/11, alpha = 1 - 2/3 = 1/3.
# Fleiss over the complete units u1..u3: P_i = 1, 1/3, 1 -> P = 7/9; p_S = 5/9, p_U = 4/9 -> P_e = 41/81;
#   kappa = (7/9 - 41/81) / (1 - 41/81) = 22/40 = 0.55.
JUDGED = {"u1": [S, S, S], "u2": [S, S, U], "u3": [U, U, U], "u4": [S, U, None]}


def test_agreement_statistics_match_the_hand_count():
    row = agreement_row(ratings(JUDGED))
    assert row["units"] == 4 and row["raters"] == 3 and row["ratings"] == 11
    assert row["P_o"] == pytest.approx(7 / 12)
    assert row["alpha"] == pytest.approx(1 / 3)
    assert row["fleiss_kappa"] == pytest.approx(0.55) and row["fleiss_units"] == 3


def test_single_rater_or_single_category_gives_nan():
    one = agreement_row(ratings({"u1": [S, None, None], "u2": [U, None, None]}))
    assert math.isnan(one["P_o"]) and math.isnan(one["alpha"]) and math.isnan(one["fleiss_kappa"])
    same = agreement_row(ratings({"u1": [S, S, S]}))
    assert same["P_o"] == 1.0 and math.isnan(same["alpha"])


def _panel_row(item, safety_votes, detection_votes=None, status="ok"):
    row = {"model": "m", "item_id": item, "rollout_status": status}
    for axis, votes in (("safety", safety_votes), ("detection", detection_votes), ("action_type", None)):
        votes = dict(zip("ABC", votes)) if votes else {}
        row[f"{axis}_votes"] = votes
        row[axis] = majority(list(votes.values())) if votes else "not_judged"
    return row


PANEL = [_panel_row(u, labs) for u, labs in JUDGED.items()] + [_panel_row("u5", [S, S, S], status="failed")]


def test_judge_reliability_counts_how_the_majority_resolved_units():
    table = judge_reliability(PANEL).set_index("axis")
    safety = table.loc["safety"]
    assert safety["P_o"] == pytest.approx(7 / 12) and safety["alpha"] == pytest.approx(1 / 3)
    # u1, u3 unanimous; u2 2-of-3; u4 (S, U, missing) unresolved; u5's rollout failed: not a unit
    assert (safety["unanimous"], safety["majority"], safety["unresolved"], safety["panel_units"]) == (2, 1, 1, 4)
    assert table.loc["detection", "units"] == 0 and math.isnan(table.loc["detection", "P_o"])
    assert table.loc["overall", "panel_units"] == 4 and table.loc["overall", "P_o"] == pytest.approx(7 / 12)


# Humans h1..h3 (safety):  u1 S S U -> ref S | u2 U U U -> ref U | u3 U S S -> ref S | u4 S U U -> ref U
# Judges (above):          u1 S S S (unan.)  | u2 S S U -> S     | u3 U U U (unan.)  | u4 S U - -> tie
#   N_p = 3 (u4 has no judge plurality): hits u1 only -> 1/3; unanimous subset u1, u3 -> 1/2.
#   human P_o = mean(1/3, 1, 1/3, 1/3) = 1/2;
#   coincidences o_SS = 2, o_UU = 4, o_SU = o_US = 3; n_S = 5, n_U = 7, n = 12:
#   D_o = 1/2, D_e = 2*5*7/(12*11) = 35/66, alpha = 1 - 33/35 = 2/35.
# Detection: u1 D3 D3 D3 by humans; judges D3 D3 D3 -> N_p 1, hit, unanimous.
# Overall pools the axes: P_o = (4 * 1/2 + 1)/5 = 3/5; with D3 added (o = 3): n = 15, D_o = 6/15,
#   D_e = 2*(5*7 + 5*3 + 7*3)/(15*14) = 142/210, alpha = 1 - 84/142 = 29/71; N_p 4, hits 2; unanimous 2/3.
HUMAN = {"u1": [S, S, U], "u2": [U, U, U], "u3": [U, S, S], "u4": [S, U, U]}


def _human_csv(tmp_path, extra_rows=()):
    rows = [{"model": "m", "item_id": u, "axis": "safety", "annotator": f"h{i + 1}", "label": lab}
            for u, labs in HUMAN.items() for i, lab in enumerate(labs)]
    rows += [{"model": "m", "item_id": "u1", "axis": "detection", "annotator": f"h{i}", "label": "D3"} for i in (1, 2, 3)]
    rows += list(extra_rows)
    path = tmp_path / "human.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def _wilson(k, n, z=1.959963984540054):
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return centre - half, centre + half


def test_table3_matches_the_hand_count(tmp_path):
    table = human_validation(read_human_labels(_human_csv(tmp_path)), _panel_u1_detection(), list("ABC")).set_index("axis")
    safety = table.loc["safety"]
    assert (safety["N"], safety["N_p"], safety["agree"]) == (4, 3, 1)
    assert safety["P_o"] == pytest.approx(1 / 2) and safety["alpha"] == pytest.approx(2 / 35)
    assert safety["acc"] == pytest.approx(1 / 3)
    assert (safety["acc_ci_low"], safety["acc_ci_high"]) == pytest.approx(_wilson(1, 3))
    assert (safety["N_unanimous"], safety["agree_unanimous"]) == (2, 1)
    det = table.loc["detection"]
    assert (det["N"], det["N_p"], det["agree"], det["N_unanimous"]) == (1, 1, 1, 1) and math.isnan(det["alpha"])
    overall = table.loc["overall"]
    assert (overall["N"], overall["N_p"], overall["agree"]) == (5, 4, 2)
    assert overall["P_o"] == pytest.approx(3 / 5) and overall["alpha"] == pytest.approx(29 / 71)
    assert (overall["N_unanimous"], overall["agree_unanimous"]) == (3, 2)
    assert table.loc["action_type", "N"] == 0
    # Table 20 strata: u2 unanimous; u1, u3, u4 two-of-three
    assert (safety["human_unanimous"], safety["human_majority"], safety["human_tied"]) == (1, 3, 0)


def _panel_u1_detection():
    return [_panel_row(u, labs, ["D3", "D3", "D3"] if u == "u1" else None) for u, labs in JUDGED.items()]


def test_an_adjudicated_reference_overrides_the_annotators_majority(tmp_path):
    # u2's annotators say Unsafe (3/3) but the adjudicated reference is Safe -> the panel's S is now a hit
    ref = {"model": "m", "item_id": "u2", "axis": "safety", "annotator": "reference", "label": "Safe"}
    table = human_validation(read_human_labels(_human_csv(tmp_path, [ref])), _panel_u1_detection(), list("ABC")).set_index("axis")
    assert (table.loc["safety", "N_p"], table.loc["safety", "agree"]) == (3, 2)
    assert table.loc["safety", "P_o"] == pytest.approx(1 / 2), "the reference row is not an annotator"


# Tables 21-22 on the same fixture (safety; reference = annotators' majority: u1 S, u2 U, u3 S, u4 U):
#   judge A: u1 S=S, u2 S!=U, u3 U!=S, u4 S!=U -> 1/4
#   judge B: u1 S=S, u2 S!=U, u3 U!=S, u4 U=U -> 2/4
#   judge C: u1 S=S, u2 U=U, u3 U!=S, u4 no vote (a miss) -> 2/4, missing 1
#   by panel consensus: unanimous u1, u3 -> A 1/2, B 1/2, C 1/2; majority u2 -> A 0/1, B 0/1, C 1/1;
#   tied u4 -> A 0/1, B 1/1, C 0/1.
def test_per_judge_accuracy_matches_the_hand_count(tmp_path):
    acc = judge_accuracy(read_human_labels(_human_csv(tmp_path)), _panel_u1_detection(), list("ABC"))
    got = {(r.judge, r.axis, r.stratum): (r.agree, r.units) for r in acc.itertuples(index=False)}
    assert got[("A", "safety", "all")] == (1, 4) and got[("B", "safety", "all")] == (2, 4)
    assert got[("C", "safety", "all")] == (2, 4)
    assert acc.set_index(["judge", "axis", "stratum"]).loc[("C", "safety", "all"), "missing"] == 1
    assert [got[(j, "safety", "unanimous")] for j in "ABC"] == [(1, 2)] * 3
    assert [got[(j, "safety", "majority")] for j in "ABC"] == [(0, 1), (0, 1), (1, 1)]
    assert [got[(j, "safety", "tied")] for j in "ABC"] == [(0, 1), (1, 1), (0, 1)]
    # overall adds u1's detection (D3 by everyone: a hit for each judge)
    assert got[("A", "overall", "all")] == (2, 5) and got[("C", "overall", "all")] == (3, 5)


def test_units_no_judge_was_asked_about_are_counted_not_scored(tmp_path):
    """x has votes; y's rollout failed (no judgment): y is not a tie in Table 23 nor a miss in Table 21."""
    path = tmp_path / "h.csv"
    path.write_text("model,item_id,axis,annotator,label\n" + "".join(
        f"m,{u},safety,h{i},Safe\n" for u in ("x", "y") for i in (1, 2, 3)))
    judgments = [{"model": "m", "item_id": "x", "axis": "safety", "judge": j, "status": "ok", "label": S} for j in "ABCD"]
    human = read_human_labels(path)
    ens = ensemble_sensitivity(human, validation_panel(judgments), list("ABCD"), list("ABC"))
    assert set(ens["N_p"]) == {1} and set(ens["T"]) == {0} and set(ens["not_judged"]) == {1}
    acc = judge_accuracy(human, validation_panel(judgments), list("ABCD")).set_index(["judge", "axis", "stratum"])
    assert acc.loc[("A", "safety", "all"), "units"] == 1 and acc.loc[("A", "safety", "tied"), "units"] == 0
    t3 = human_validation(human, validation_panel(judgments), list("ABCD")).set_index("axis")
    assert (t3.loc["safety", "N"], t3.loc["safety", "N_p"], t3.loc["safety", "not_judged"]) == (2, 1, 1)


def test_unreadable_human_labels_name_the_file(tmp_path):
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    with pytest.raises(ValueError, match="empty.csv: cannot read human labels"):
        read_human_labels(empty)


def test_majority_and_plurality_rules():
    assert strict_majority([S, S, U]) == S and strict_majority([S, U]) is None and strict_majority([]) is None
    assert plurality([S, U]) is None and plurality([S, S, U]) == S and plurality(["D1", "D2", "D2", "D3"]) == "D2"
    # a missing vote competes but never wins
    assert plurality([S, None, None]) is None and plurality([S, S, None]) == S and plurality([S, U, None]) is None
    assert consensus([S, S, None]) == "majority" and consensus([S, S, S]) == "unanimous" and consensus([S, None]) == "tied"


def test_panel_votes_follow_the_roles_judges_list(tmp_path):
    """judges [a, b, c] (distinct: the schema's uniqueItems): each votes once, in roles order; a missing
    vote is not unanimity, and a vote from a model outside the list is ignored."""
    path = tmp_path / "h.csv"
    path.write_text("model,item_id,axis,annotator,label\n" + "".join(
        f"m,{u},safety,h{i},Safe\n" for u in ("x", "y", "z") for i in (1, 2, 3)))
    row_x = {"model": "m", "item_id": "x", "rollout_status": "ok", "safety_votes": {"a": S, "b": U, "c": S}}
    row_y = {"model": "m", "item_id": "y", "rollout_status": "ok", "safety_votes": {"a": S, "b": None, "c": S}}
    row_z = {"model": "m", "item_id": "z", "rollout_status": "ok", "safety_votes": {"a": U, "b": U, "c": S, "d": S}}
    table = human_validation(read_human_labels(path), [row_x, row_y, row_z], ["a", "b", "c"]).set_index("axis")
    # reference Safe everywhere. x: [S, U, S] -> S, a hit, not unanimous; y: [S, None, S] -> S, a hit, not
    # unanimous; z: [U, U, S] -> U (d is not on the panel), a miss. N_p 3, agree 2, unanimous 0.
    assert (table.loc["safety", "N_p"], table.loc["safety", "agree"], table.loc["safety", "N_unanimous"]) == (3, 2, 0)


def test_fleiss_needs_equal_counts_not_the_same_raters():
    """A pool of annotators (3 of 4 per unit) still gives Fleiss' kappa over every unit."""
    pool = pd.DataFrame([{"unit": u, "rater": r, "label": lab} for u, r, lab in [
        ("u1", "h1", S), ("u1", "h2", S), ("u1", "h3", S),
        ("u2", "h2", S), ("u2", "h3", S), ("u2", "h4", U),
        ("u3", "h1", U), ("u3", "h3", U), ("u3", "h4", U)]])
    row = agreement_row(pool)
    # same category counts as u1..u3 of the judge fixture: kappa 0.55 over 3 units
    assert row["fleiss_kappa"] == pytest.approx(0.55) and row["fleiss_units"] == 3


@pytest.mark.parametrize("bad, message", [
    ({"model": "m", "item_id": "u9", "axis": "safety", "annotator": "h1", "label": "Maybe"}, "row 17 .*'u9'.*'Maybe'"),
    ({"model": "m", "item_id": "u9", "axis": "tone", "annotator": "h1", "label": "Safe"}, "row 17 .*unknown axis 'tone'"),
    ({"model": "m", "item_id": "u1", "axis": "safety", "annotator": "h1", "label": "Safe"}, "'h1' labels item_id 'u1'"),
])
def test_bad_human_labels_name_the_file_and_row(tmp_path, bad, message):
    path = _human_csv(tmp_path, [bad])
    with pytest.raises(ValueError, match=message) as err:
        read_human_labels(path)
    assert str(path) in str(err.value)


# Table 23 on four validation judges A, B, C, D (safety; references from HUMAN: u1 S, u2 U, u3 S, u4 U):
#   unit  A  B  C  D   | ABC        ABD        ACD        BCD        ABCD
#   u1    S  S  S  S   | S unan hit  S unan hit S unan hit S unan hit S unan hit
#   u2    S  S  U  U   | S miss     S miss     U hit      U hit      tie
#   u3    U  U  U  S   | U unan miss U miss    U miss     U miss     U miss
#   u4    S  U  -  U   | tie        U hit      tie        U hit      U hit
#   ABC: N_p 3, hits 1, N_u 2, T 1 | ABD: 4, 2, 1, 0 | ACD: 3, 2, 1, 1 | BCD: 4, 3, 1, 0 | ABCD: 3, 2, 1, 1
def test_ensemble_sensitivity_matches_the_hand_count(tmp_path):
    votes = {"u1": [S, S, S, S], "u2": [S, S, U, U], "u3": [U, U, U, S], "u4": [S, U, None, U]}
    judgments = [{"model": "m", "item_id": u, "axis": "safety", "judge": j, "status": "ok" if lab else "failed",
                  "label": lab} for u, labs in votes.items() for j, lab in zip("ABCD", labs)]
    human = read_human_labels(_human_csv(tmp_path))
    human = human[human["axis"] == "safety"]
    table = ensemble_sensitivity(human, validation_panel(judgments), list("ABCD"), list("ABC"))
    got = {r.ensemble: (r.N_p, r.agree, r.N_u, r.T, r.scoring_panel) for r in table.itertuples(index=False)}
    assert got == {"A + B + C": (3, 1, 2, 1, True), "A + B + D": (4, 2, 1, 0, False), "A + C + D": (3, 2, 1, 1, False),
                   "B + C + D": (4, 3, 1, 0, False), "A + B + C + D": (3, 2, 1, 1, False)}
    assert list(table["ensemble"])[0] == "A + B + C + D", "the full panel first, then subsets by accuracy"
