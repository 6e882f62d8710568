"""Leave-one-vendor-out replacement analysis (Table 24): config rules and a hand-counted fixture."""
from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from aura.config import ConfigError, validate_config
from aura.families.aura.evaluate.panel import majority
from aura.families.aura.settings import vendor_overlaps
from aura.families.aura.stats.vendor_overlap import compare, paired_labels, table24
from conftest import base_config

JUDGES = ["A", "B", "C"]


def _raw(**vendors) -> dict:
    raw = base_config("http://127.0.0.1:9/v1", Path("/tmp/unused/cache"))
    m = raw["models"]["m"]
    raw["models"] = {name: {**copy.deepcopy(m), **({"vendor": v} if v else {})} for name, v in vendors.items()}
    raw["aura"]["roles"].update(judges=["ja", "jb", "jc"], evaluated=["ea", "ez"], replacement_judge="jr",
                        generator="ja", classifier="ja", reviewers=["ja", "jb", "jc"])
    return raw


def test_models_sharing_a_panel_vendor_are_found():
    raw = _raw(ja="acme", jb="beta", jc="gamma", jr="delta", ea="acme", ez="zeta")
    assert vendor_overlaps(raw) == {"ea": ["ja"]}
    raw["aura"]["roles"].pop("replacement_judge")
    assert vendor_overlaps(raw) == {}, "no replacement judge: no analysis"


def test_explicit_model_list_is_checked():
    raw = _raw(ja="acme", jb="beta", jc="gamma", jr="delta", ea="acme", ez="zeta")
    raw["aura"]["evaluate"] = {"vendor_overlap_models": ["ez"]}
    with pytest.raises(ConfigError, match="aura.evaluate.vendor_overlap_models: 'ez' shares no vendor"):
        validate_config(raw)
    raw["aura"]["evaluate"] = {"vendor_overlap_models": ["ja"]}
    with pytest.raises(ConfigError, match="aura.evaluate.vendor_overlap_models: 'ja' is not an evaluated model"):
        validate_config(raw)


def test_replacement_judge_of_the_same_vendor_is_refused():
    raw = _raw(ja="acme", jb="beta", jc="gamma", jr="acme", ea="acme", ez="zeta")
    with pytest.raises(ConfigError, match="same vendor 'acme'"):
        validate_config(raw)


def _row(item, a, b, c, status="ok"):
    votes = {"A": a, "B": b, "C": c}
    label = majority([a, b, c]) if status == "ok" else f"rollout_{status}"
    return {"item_id": item, "model": "m", "rollout_status": status, "safety": label,
            "safety_votes": votes if status == "ok" else {}}


# Hand-counted fixture (judge A shares the evaluated model's vendor and is replaced by R):
#   item seed  A      B      C      -> original | R      -> replacement votes      -> replacement
#   i1   s1    Safe   Unsafe Unsafe -> Unsafe   | Safe   -> Safe,Unsafe,Unsafe     -> Unsafe
#   i2   s1    Safe   Safe   Unsafe -> Safe     | Unsafe -> Unsafe,Safe,Unsafe     -> Unsafe   (changed)
#   i3   s2    Unsafe Safe   Safe   -> Safe     | Safe   -> Safe,Safe,Safe         -> Safe
#   i4   s2    Safe   Unsafe None   -> unresolved | Unsafe -> Unsafe,Unsafe,None   -> Unsafe   (excluded: original)
#   i5   s3    rollout failed       -> rollout_failed on both sides                        (excluded: both)
#   i7   s3    Safe   Safe   Safe   -> Safe     | (no replacement judgment) -> not_judged  (excluded: replacement)
#   i6   s9    not in the sample: ignored
# Paired (resolved on both sides): i1, i2, i3 -> n=3; original Safe 2/3, replacement Safe 1/3, diff +1/3.
PANEL = [_row("i1", "Safe", "Unsafe", "Unsafe"), _row("i2", "Safe", "Safe", "Unsafe"), _row("i3", "Unsafe", "Safe", "Safe"),
         _row("i4", "Safe", "Unsafe", None), _row("i5", None, None, None, status="failed"),
         _row("i6", "Safe", "Safe", "Safe"), _row("i7", "Safe", "Safe", "Safe")]
REPL = {"i1": "Safe", "i2": "Unsafe", "i3": "Safe", "i4": "Unsafe", "i5": None, "i6": "Unsafe"}
SEEDS = {"i1": "s1", "i2": "s1", "i3": "s2", "i4": "s2", "i5": "s3", "i7": "s3"}


def test_paired_labels_swap_only_the_replaced_judge():
    df = paired_labels(PANEL, {k: v for k, v in REPL.items() if k != "i5"}, set(SEEDS), JUDGES, ["A"])
    got = dict(zip(df["item_id"], zip(df["original"], df["replacement"])))
    assert got == {"i1": ("Unsafe", "Unsafe"), "i2": ("Safe", "Unsafe"), "i3": ("Safe", "Safe"),
                   "i4": ("unresolved", "Unsafe"), "i5": ("rollout_failed", "rollout_failed"),
                   "i7": ("Safe", "not_judged")}


def _reference_ci(units: list[tuple[int, int, int]], n_resamples: int, seed: int) -> tuple[float, float]:
    """Slow reference: one resample at a time, seeds in sorted order, same generator."""
    rng = np.random.default_rng(seed)
    diffs = []
    for _ in range(n_resamples):
        idx = rng.integers(0, len(units), size=len(units))
        o = sum(units[i][0] for i in idx)
        r = sum(units[i][1] for i in idx)
        n = sum(units[i][2] for i in idx)
        diffs.append((o - r) / n)
    lo, hi = np.percentile(diffs, [2.5, 97.5])
    return float(lo), float(hi)


def test_table24_numbers_match_the_hand_count_and_a_slow_bootstrap():
    judgments = [{"item_id": i, "model": "m", "judge": "R", "axis": "safety", "status": "ok" if lab else "unparsed",
                  "label": lab} for i, lab in REPL.items()]
    judgments.append({"item_id": "i1", "model": "m", "judge": "R", "axis": "action_type", "status": "ok", "label": "A0"})
    sample = [{"item_id": i, "seed_id": s} for i, s in SEEDS.items()]
    table = table24({"m": PANEL}, judgments, sample, JUDGES, {"m": ["A"]}, n_resamples=2000, seed=42)
    (row,) = table.to_dict("records")
    assert row["replaced_judges"] == "A"
    assert (row["sample_items"], row["paired_n"], row["excluded"]) == (6, 3, 3)
    assert (row["excluded_original"], row["excluded_replacement"], row["labels_changed"]) == (2, 2, 1)
    assert (row["orig_safe"], row["repl_safe"]) == (2, 1)
    assert row["orig_safe_rate"] == pytest.approx(2 / 3) and row["repl_safe_rate"] == pytest.approx(1 / 3)
    assert row["diff"] == pytest.approx(1 / 3) and row["n_seeds"] == 2
    # seed units (orig Safe, repl Safe, n): s1 = (1, 0, 2), s2 = (1, 1, 1)
    lo, hi = _reference_ci([(1, 0, 2), (1, 1, 1)], 2000, 42)
    assert (row["diff_ci_low"], row["diff_ci_high"]) == pytest.approx((lo, hi), abs=1e-12)
    assert row["ci_includes_zero"] == (lo <= 0 <= hi)


def test_no_paired_item_gives_nan_not_an_error():
    df = pd.DataFrame({"item_id": ["x"], "seed_id": ["s"], "original": ["unresolved"], "replacement": ["Safe"]})
    out = compare(df, n_resamples=100, seed=1)
    assert out["paired_n"] == 0 and out["excluded"] == 1 and np.isnan(out["diff"]) and out["ci_includes_zero"] is None
