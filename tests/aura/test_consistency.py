"""Intra-judge consistency (Table 25) on a hand-counted fixture."""
from __future__ import annotations

import math

import pandas as pd
import yaml

from aura.cli import main
from aura.io import read_jsonl, write_jsonl
from aura.families.aura.stats.consistency import CALIBRATION, STRATIFIED, consistency


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


# --- the population: calibration subset (human-labelled units) or the stratified sample ---------------

def test_calibration_units_keep_only_the_labelled_axis_of_each_item():
    # units: (m, i1, safety), (m, i2, detection), (m2, i1, safety)
    #   (m, i1, safety)    S S S -> consistent          (m, i1, detection) D2 D1 D2: not a unit, ignored
    #   (m, i2, detection) D0 D0 D0 -> consistent       (m, i2, safety) S U S: not a unit, ignored
    #   (m2, i1, safety)   U S U -> not consistent
    # -> A safety 1/2 = 0.5 over 2 units, A detection 1/1, A all 2/3; without the units:
    #    safety 3 units (i1 m, i2 m, i1 m2), 1 consistent; detection 2 units, 1 consistent.
    rows = [j("A", "safety", "i1", r, "Safe") for r in range(3)] + \
           [j("A", "detection", "i1", r, lab) for r, lab in enumerate(["D2", "D1", "D2"])] + \
           [j("A", "detection", "i2", r, "D0") for r in range(3)] + \
           [j("A", "safety", "i2", r, lab) for r, lab in enumerate(["Safe", "Unsafe", "Safe"])] + \
           [j("A", "safety", "i1", r, lab, model="m2") for r, lab in enumerate(["Unsafe", "Safe", "Unsafe"])]
    units = {("m", "i1", "safety"), ("m", "i2", "detection"), ("m2", "i1", "safety")}
    t = consistency(rows, {"i1", "i2"}, runs=3, units=units).set_index(["judge", "axis"])
    assert (t.loc[("A", "safety"), "units"], t.loc[("A", "safety"), "consistent"]) == (2, 1)
    assert t.loc[("A", "safety"), "consistency"] == 0.5
    assert (t.loc[("A", "detection"), "units"], t.loc[("A", "detection"), "consistency"]) == (1, 1.0)
    assert (t.loc[("A", "all"), "complete"], t.loc[("A", "all"), "consistent"]) == (3, 2)
    t = consistency(rows, {"i1", "i2"}, runs=3).set_index(["judge", "axis"])
    assert (t.loc[("A", "safety"), "units"], t.loc[("A", "safety"), "consistent"]) == (3, 1)
    assert (t.loc[("A", "detection"), "units"], t.loc[("A", "detection"), "consistent"]) == (2, 1)


def _items(n=8):
    # 4 NSP + 4 SP items over two dimensions
    return [{"item_id": f"it{i}", "pair_label": "NSP" if i < 4 else "SP", "dimension": "RS1" if i % 2 else "original",
             "model_input": f"[USER] task {i}", "profile": "p"} for i in range(n)]


def _stage_config(tmp_path, **evaluate):
    from conftest import base_config

    raw = base_config("http://127.0.0.1:9/v1", tmp_path / "cache")  # no model is called
    raw["models"].update({n: dict(raw["models"]["m"]) for n in ("m2", "m3")})  # a panel of three distinct judges
    raw["aura"]["roles"].update(judges=["m", "m2", "m3"], reviewers=["m", "m2", "m3"])
    raw["aura"]["evaluate"] = {"consistency_models": ["m"], "consistency_runs": 3, **evaluate}
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(raw))
    return str(path)


def _table(tmp_path, cfg, sample, judgments):
    write_jsonl(tmp_path / "j.jsonl", judgments)
    out = tmp_path / "t25.csv"
    assert main(["consistency", "--configfile", cfg, "--in", f"sample={sample}", "--in", f"judgments_0={tmp_path / 'j.jsonl'}",
                 "--out", f"table25={out}"]) == 0
    return pd.read_csv(out).set_index(["judge", "axis"])


def test_with_human_labels_table25_is_on_the_calibration_subset(tmp_path):
    # human labels: m/it1 safety (2 annotators), m/it2 detection, m/it2 safety, other/it3 safety (model not
    # in consistency_models: left out) -> sample it1 [m safety], it2 [m detection, m safety]; 3 units.
    write_jsonl(tmp_path / "dataset.jsonl", _items())
    (tmp_path / "human.csv").write_text("model,item_id,axis,annotator,label\n"
                                        "m,it1,safety,a1,Safe\nm,it1,safety,a2,Safe\nm,it2,detection,a1,D1\n"
                                        "m,it2,safety,a1,Unsafe\nother,it3,safety,a1,Safe\n")
    cfg = _stage_config(tmp_path)
    sample = tmp_path / "sample.jsonl"
    assert main(["consistency", "--configfile", cfg, "--in", f"dataset={tmp_path / 'dataset.jsonl'}",
                 "--in", f"human_labels={tmp_path / 'human.csv'}", "--out", f"sample={sample}"]) == 0
    rows = list(read_jsonl(sample))
    assert [(r["item_id"], r["calibration_units"]) for r in rows] == [
        ("it1", [["m", "safety"]]), ("it2", [["m", "detection"], ["m", "safety"]])]
    assert {r["population"] for r in rows} == {CALIBRATION}
    # judge m, 3 runs: it1 safety S S S; it2 safety U U S; it2 detection D1 D1 D1; it1 detection D0 D0 D0 (not a
    # unit) -> safety 1/2, detection 1/1 (units 1), all 2/3
    judg = [j("m", "safety", "it1", r, "Safe") for r in range(3)] + \
           [j("m", "safety", "it2", r, lab) for r, lab in enumerate(["Unsafe", "Unsafe", "Safe"])] + \
           [j("m", "detection", "it2", r, "D1") for r in range(3)] + [j("m", "detection", "it1", r, "D0") for r in range(3)]
    t = _table(tmp_path, cfg, sample, judg)
    assert t.loc[("m", "safety"), "consistency"] == 0.5 and t.loc[("m", "detection"), "units"] == 1
    assert (t.loc[("m", "all"), "complete"], t.loc[("m", "all"), "consistent"]) == (3, 2)
    assert set(t["population"]) == {CALIBRATION}


def test_without_human_labels_table25_is_on_the_stratified_sample(tmp_path):
    # 8 items, size 4: half NSP (2) and half SP (2), every axis of every item counts
    write_jsonl(tmp_path / "dataset.jsonl", _items())
    cfg = _stage_config(tmp_path, consistency_sample_size=4)
    sample = tmp_path / "sample.jsonl"
    assert main(["consistency", "--configfile", cfg, "--in", f"dataset={tmp_path / 'dataset.jsonl'}",
                 "--out", f"sample={sample}"]) == 0
    rows = list(read_jsonl(sample))
    assert len(rows) == 4 and [r["pair_label"] for r in rows].count("NSP") == 2
    assert all(r["population"] == STRATIFIED and "calibration_units" not in r for r in rows)
    ids = [r["item_id"] for r in rows]
    # judge m, safety on the 4 sampled items: the first flips once -> 3/4; detection on all 4: same -> 4/4
    judg = [j("m", "safety", i, r, "Unsafe" if (i == ids[0] and r == 1) else "Safe") for i in ids for r in range(3)] + \
           [j("m", "detection", i, r, "D2") for i in ids for r in range(3)]
    t = _table(tmp_path, cfg, sample, judg)
    assert (t.loc[("m", "safety"), "units"], t.loc[("m", "safety"), "consistency"]) == (4, 0.75)
    assert t.loc[("m", "detection"), "consistency"] == 1.0 and set(t["population"]) == {STRATIFIED}


def test_labelled_items_missing_from_the_dataset_are_left_out_and_counted(tmp_path, capsys):
    # labels: m/it1 safety (in the dataset), m/it9 safety and m/it9 detection (not in it): 1 unit kept, 2 left out
    write_jsonl(tmp_path / "dataset.jsonl", _items(2))
    (tmp_path / "human.csv").write_text("model,item_id,axis,annotator,label\nm,it1,safety,a1,Safe\n"
                                        "m,it9,safety,a1,Safe\nm,it9,detection,a1,D0\n")
    cfg, sample = _stage_config(tmp_path), tmp_path / "s.jsonl"
    args = ["consistency", "--configfile", cfg, "--in", f"dataset={tmp_path / 'dataset.jsonl'}",
            "--in", f"human_labels={tmp_path / 'human.csv'}", "--out", f"sample={sample}"]
    assert main(args) == 0
    assert [(r["item_id"], r["calibration_units"]) for r in read_jsonl(sample)] == [("it1", [["m", "safety"]])]
    assert "1 (model, item, axis) units on 1 items; 2 labelled units left out" in capsys.readouterr().err
    # none of the labelled items in the dataset: the stratified sample, and the log says why
    (tmp_path / "human.csv").write_text("model,item_id,axis,annotator,label\nm,it9,safety,a1,Safe\n")
    assert main(args) == 0
    rows = list(read_jsonl(sample))
    assert len(rows) == 2 and {r["population"] for r in rows} == {STRATIFIED}  # size 61 capped at the 2 items
    err = capsys.readouterr().err
    assert "no human-labelled item of ['m']" in err and "stratified sample instead" in err
