"""Intra-judge consistency (Table 25) on a hand-counted fixture."""
from __future__ import annotations

import math

from aura.stats.consistency import consistency


def j(judge, axis, item, run, label, status="ok", model="m"):
    return {"judge": judge, "model": model, "axis": axis, "item_id": item, "run": run, "status": status,
            "label": label if status == "ok" else None}


# Judge A, safety, 3 runs: i1 S S S (same) | i2 S U S (differs) | i3 S - S (run 1 unparsed: incomplete)
#                          i4 outside the sample: ignored.
# Judge A, detection: i1 D2 D2 D2 (same); run 0 rows have no "run" field (main judging).
# Judge B, safety: i1 U U U, i2 U U U -> 2/2.
ROWS = [j("A", "safety", "i1", r, "Safe") for r in range(3)] + \
       [j("A", "safety", "i2", 0, "Safe"), j("A", "safety", "i2", 1, "Unsafe"), j("A", "safety", "i2", 2, "Safe")] + \
       [j("A", "safety", "i3", 0, "Safe"), j("A", "safety", "i3", 1, None, status="unparsed"), j("A", "safety", "i3", 2, "Safe")] + \
       [j("A", "safety", "i4", r, "Safe") for r in range(3)] + \
       [{k: v for k, v in j("A", "detection", "i1", 0, "D2").items() if k != "run"}] + \
       [j("A", "detection", "i1", r, "D2") for r in (1, 2)] + \
       [j("B", "safety", i, r, "Unsafe") for i in ("i1", "i2") for r in range(3)]


def test_table25_matches_the_hand_count():
    t = consistency(ROWS, {"i1", "i2", "i3"}, runs=3).set_index(["judge", "axis"])
    a = t.loc[("A", "safety")]
    assert (a["units"], a["complete"], a["incomplete"], a["consistent"]) == (3, 2, 1, 1)
    assert a["consistency"] == 0.5
    assert t.loc[("A", "detection"), "consistency"] == 1.0 and t.loc[("A", "detection"), "complete"] == 1
    assert t.loc[("A", "action_type"), "units"] == 0 and math.isnan(t.loc[("A", "action_type"), "consistency"])
    allA = t.loc[("A", "all")]
    assert (allA["complete"], allA["consistent"], allA["incomplete"]) == (3, 2, 1)
    assert t.loc[("B", "safety"), "consistency"] == 1.0 and t.loc[("B", "all"), "complete"] == 2


def test_a_missing_run_makes_the_unit_incomplete():
    rows = [j("A", "safety", "i1", 0, "Safe"), j("A", "safety", "i1", 1, "Safe")]  # run 2 never came back
    t = consistency(rows, {"i1"}, runs=3).set_index(["judge", "axis"])
    assert t.loc[("A", "safety"), "incomplete"] == 1 and t.loc[("A", "safety"), "complete"] == 0
