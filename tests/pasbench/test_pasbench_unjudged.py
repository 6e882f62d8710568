"""Issue 33 (PaSBench): an unjudged run counts as not warned (n = N, the paper's denominators) and is listed
beside; Figure 7's realised first-K counts and its curves; Figure 5's 128 points from the image metadata when
the images are absent. Hand-derived values beside each assertion."""
from __future__ import annotations

import json

import pandas as pd
import pytest

from aura.families.pasbench import metrics as M
from aura.families.pasbench import stats as S
from aura.families.pasbench.data import IMAGE_FILE
from aura.io import sha256_file

# 6 image items x 16 runs of model "m". Runs as (sample -> outcome): True detected, False not, "unparsed".
#   A: all 16 detected                    c = 16
#   B: runs 0-14 detected, run 15 unparsed  c = 15 (one unjudged run)
#   C: runs 0-7 detected                   c = 8
#   D: runs 12-15 detected                 c = 4
#   E: none                                c = 0
#   F: run 3 detected                      c = 1
PLAN = {"A": set(range(16)), "B": set(range(15)), "C": set(range(8)), "D": {12, 13, 14, 15}, "E": set(), "F": {3}}


def synthetic(model: str = "m") -> pd.DataFrame:
    rows = []
    for name, hit in PLAN.items():
        for s in range(16):
            unparsed = name == "B" and s == 15
            rows.append({"item_id": f"image-{name}", "model": model, "sample": s, "modality": "image",
                         "status": "unparsed" if unparsed else "ok", "detected": None if unparsed else s in hit})
    return pd.DataFrame(rows)


def test_worst_of_n_counts_the_unjudged_run_as_not_warned():
    counts = M.item_counts(synthetic())
    assert counts.set_index("item_id").loc["image-B", ["n", "c", "judged", "unparsed"]].tolist() == [16, 15, 15, 1]
    row = M.rates(counts, n_resamples=100, seed=0).iloc[0]
    # Worst-of-N: items warned in all 16 runs: A only -> 1/6 = 0.167 (dropping B's unparsed run from its n made
    # B 15 of 15 and Worst-of-N 2/6 = 0.333)
    assert row["worst_of_n"] == pytest.approx(1 / 6)
    # Average-of-N: (16 + 15 + 8 + 4 + 0 + 1) / (6 x 16) = 44/96 (dropping: (1 + 1 + 1/2 + 1/4 + 0 + 1/16)/6 = 0.469)
    assert row["avg_of_n"] == pytest.approx(44 / 96)
    # Best-of-N: all but E -> 5/6
    assert row["best_of_n"] == pytest.approx(5 / 6)
    # listed beside: 96 runs, 95 judged, 1 unparsed; no item without a judged run
    assert (row["n_items"], row["n_samples"], row["judged"], row["unparsed"], row["failed"], row["items_unjudged"]) \
        == (6, 96, 95, 1, 0, 0)


def test_k_equal_one_of_the_curve_is_the_average_of_n_on_the_same_data():
    counts = M.item_counts(synthetic())
    avg = M.rates(counts, n_resamples=100, seed=0).iloc[0]["avg_of_n"]
    curve = M.k_curves(counts, n_resamples=100, seed=0).set_index("k")
    # the curve keeps B (16 runs, one unparsed): 6 items at every K; before, B was left out and K = 1 read
    # (16 + 8 + 4 + 0 + 1)/80 = 0.3625 against Average-of-N's 0.469
    assert curve.loc[1, "best_of_k"] == curve.loc[1, "worst_of_k"] == pytest.approx(avg) == pytest.approx(44 / 96)
    assert (curve["n_items"] == 6).all() and (curve["items_left_out"] == 0).all() and (curve["unjudged"] == 1).all()
    assert curve.loc[16, "worst_of_k"] == pytest.approx(1 / 6) and curve.loc[16, "best_of_k"] == pytest.approx(5 / 6)
    assert (curve["avg_of_k"] == curve.loc[1, "avg_of_k"]).all()  # Accuracy: c/n at every K


def test_first_k_counts_are_the_realised_runs_in_sample_order():
    curve = M.k_curves(M.item_counts(synthetic()), n_resamples=50, seed=0, judgments=synthetic()).set_index("k")
    # K = 1 (run 0): A, B, C warned -> best = worst = avg = 3/6
    assert curve.loc[1, ["first_best_items", "first_worst_items"]].tolist() == [3, 3]
    assert curve.loc[1, "first_avg"] == pytest.approx(0.5)
    # K = 4 (runs 0-3): warned at least once A, B, C, F (run 3) = 4; every time A, B, C = 3;
    # warned runs (4 + 4 + 4 + 0 + 0 + 1)/(6 x 4) = 13/24
    assert curve.loc[4, ["first_best_items", "first_worst_items"]].tolist() == [4, 3]
    assert (curve.loc[4, "first_best"], curve.loc[4, "first_avg"]) == pytest.approx((4 / 6, 13 / 24))
    # the unbiased Best-of-4 is larger: D's 4 hits of 16 count with 1 - C(12,4)/C(16,4) = 1 - 495/1820
    best4 = (1 + 1 + (1 - 70 / 1820) + (1 - 495 / 1820) + 0 + (1 - 1365 / 1820)) / 6
    assert curve.loc[4, "best_of_k"] == pytest.approx(best4)
    # K = 16 (every run): at least once A, B, C, D, F = 5; every time A only (B's run 15 unparsed) = 1:
    # the realised counts at K = N are Best-/Worst-of-N
    assert curve.loc[16, ["first_best_items", "first_worst_items"]].tolist() == [5, 1]
    assert (curve.loc[16, "first_best"], curve.loc[16, "first_worst"], curve.loc[16, "first_avg"]) == \
        pytest.approx((5 / 6, 1 / 6, 44 / 96))


def _items(image: bool) -> pd.DataFrame:
    rows = [{"item_id": f"text-{i:04d}", "modality": "text", "safety_knowledge": f"k{i}", "words": 450,
             "n_images": 0, "severity": "info"} for i in range(4)]
    if image:
        rows += [{"item_id": f"image-{n}", "modality": "image", "safety_knowledge": f"k{i}", "words": None,
                  "n_images": 2, "severity": None} for i, n in enumerate(PLAN)]
    return pd.DataFrame(rows)


def test_figure_7_marks_the_papers_two_models_on_the_image_set():
    judgments = pd.concat([synthetic("gemini-2.5-pro"), synthetic("gpt-4.1-nano"), synthetic("other")])
    raw = {"pasbench": {"samples": 16, "samples_by_model": {"gemini-2.5-pro": {"image": 128},
                                                             "gpt-4.1-nano": {"image": 128}}}}
    tables = S.compute(_items(True), judgments, pd.DataFrame(), pd.DataFrame(), pd.DataFrame(), 50, 0, samples=16,
                       figure=S.figure7(raw))
    flags = tables["k_curves"].groupby("model")["in_figure"].all().to_dict()
    assert flags == {"gemini-2.5-pro": True, "gpt-4.1-nano": True, "other": False}
    assert S.figure7({"pasbench": {}}) is None  # no model run beyond N: every image curve is drawn
    assert list(tables["k_curves"].columns) == M.K_COLUMNS


def test_figure_5_takes_the_papers_points_from_the_image_metadata(tmp_path):
    folder = tmp_path / "pas"
    folder.mkdir()
    meta = folder / IMAGE_FILE
    meta.write_text(json.dumps([{"safety_knowledge": "k0", "input": "1.png"}, {"safety_knowledge": "k2",
                                                                               "input": "2.png"}]), encoding="utf-8")
    items_file = tmp_path / "items.jsonl"
    items_file.write_text("", encoding="utf-8")
    prov = tmp_path / "items.jsonl.prov.json"
    prov.write_text(json.dumps({"folder": str(folder), "files": {IMAGE_FILE: sha256_file(meta)}}), encoding="utf-8")
    points, where = S.image_metadata_points([items_file])
    assert (points, where) == ({"k0", "k2"}, str(meta))
    # text-only items (no image item): Figure 5 draws the image points k0, k2 from the metadata
    probe = pd.DataFrame([{"item_id": f"text-{i:04d}", "model": "m", "status": "ok", "answer": "A",
                           "outcome": "a_correct" if i < 2 else "b"} for i in range(4)])
    table = M.knowledge(probe, _items(False), M.item_counts(pd.DataFrame()), points)
    fig = table[table["in_figure"]]
    # k0 (a_correct) and k2 (b) -> 2 points, knowledge 1/2; no image run -> image Average-of-N NaN, said in note
    assert fig[["subset", "n_points", "a_correct", "b", "accuracy"]].values.tolist() == [["image_points", 2, 1, 1, 0.5]]
    assert fig["note"].iloc[0] == M.META_NOTE and fig["image_avg_of_n"].isna().all()
    # without the metadata the text points are drawn, as before
    assert table_subset(M.knowledge(probe, _items(False), M.item_counts(pd.DataFrame()))) == "text_points"
    # a changed metadata file is not read (its checksum no longer matches the items' provenance)
    meta.write_text("[]", encoding="utf-8")
    assert S.image_metadata_points([items_file]) == (None, f"{meta}: missing or changed since the items were read")


def table_subset(table: pd.DataFrame) -> str:
    return str(table.loc[table["in_figure"], "subset"].iloc[0])
