"""AURA's reproduction stage maps the paper's reported numbers to the run's stats tables: which rows are mapped (and
why the rest are not), and hand-derived estimates on small stats frames with the producers' column names."""
from __future__ import annotations

import io
import math
import shutil
from pathlib import Path

import pandas as pd
import pytest
import yaml

from aura.families.aura.construct import counts
from aura.families.aura.stats import reproduction_support as R
from aura.families.aura.stats.reproduction import INPUTS, OPTIONAL, REFERENCE, lookup_for
from aura.stats.reproduction import UNMAPPED
from aura.stats.calibration import mapped
from aura.stats.reference import load_reference
from aura.stats.reproduction import verdict_table
from aura.stats.verdict import Z95, Estimate

REPO = Path(__file__).resolve().parents[2]
REF = load_reference(REFERENCE)
FRONTIER, OPEN, TUNED = (R.PAPER_GROUPS[g] for g in ("frontier", "open-weight", "safety-tuned"))


def row(file: str, row_name: str, column: str | None = None, **match) -> pd.Series:
    """The one reference row of ``file`` named ``row_name`` (and ``column``)."""
    hit = REF[(REF["file"] == file) & (REF["row"] == row_name)]
    if column is not None:
        hit = hit[hit["column"] == column]
    for k, v in match.items():
        hit = hit[hit[k] == v]
    assert len(hit) == 1, (file, row_name, column, len(hit))
    return hit.iloc[0]


def csv(frame: pd.DataFrame) -> pd.DataFrame:
    """The frame as the stage reads it back (read_input: pd.read_csv)."""
    return pd.read_csv(io.StringIO(frame.to_csv(index=False)))


def folder(tmp: Path, *files: str) -> Path:
    """A copy of the family's reference folder with only ``files`` (and its margins)."""
    tmp.mkdir(parents=True, exist_ok=True)
    for name in (*files, "margins.yaml"):
        shutil.copy(REFERENCE / name, tmp)
    return tmp


# --- which rows are mapped ---------------------------------------------------------------------------------------
def test_mapped_rows_and_why_the_rest_are_not():
    lookup = lookup_for({name: pd.DataFrame() for name in INPUTS})
    is_mapped = mapped(REF, lookup)
    assert len(REF) == 171 and int(is_mapped.sum()) >= 154
    # an empty run: every mapped row is "not produced" (None), never an error or another reason
    assert all(lookup(r) is None for _, r in REF[is_mapped].iterrows())
    # every unmapped row says why, specifically (no generic "no reproduced counterpart")
    why = {i: lookup(r) for i, r in REF[~is_mapped].iterrows()}
    assert all(w.startswith(UNMAPPED) and len(w) > len(UNMAPPED) + 30 for w in why.values())
    assert set(why.values()) == {R.SEED_FACT, R.DROP_REASON, R.OTHER_ENSEMBLE, R.CASE_STUDY}
    assert REF[~is_mapped].groupby("file").size().to_dict() == {
        "case_study.csv": 1, "dataset.csv": 8, "ensembles.csv": 5, "human_validation.csv": 3}


def test_the_paper_roster_is_config_paper_yaml():
    raw = yaml.safe_load((REPO / "config" / "paper.yaml").read_text())
    roles, ev = raw["aura"]["roles"], raw["aura"]["evaluate"]
    assert sorted(R.PAPER_EVALUATED) == sorted(roles["evaluated"]) and R.PAPER_MODELS == 20
    assert {m: g for g, ms in R.PAPER_GROUPS.items() for m in ms} == {m: raw["models"][m]["group"]
                                                                      for m in roles["evaluated"]}
    assert sorted(R.FORMAT_MODELS) == sorted(ev["format_models"])
    assert R.PAPER_JUDGES == tuple(roles["judges"])
    assert sorted(R.VALIDATION_JUDGES) == sorted(roles["validation_judges"])


def test_the_funnel_and_composition_keys_are_the_rows_the_paper_states():
    """The construction-counts stage keeps the paper's figure beside each of its counts: each mapped key's figure
    is the reference row's value, and its n the figure of the count it is a part of."""
    paper = {count: figure for _, count, figure in counts.FUNNEL}
    for (measures, name), (count, of) in R.FUNNEL.items():
        r = row("dataset.csv", name, measures=measures)
        assert paper[count] == r["value"] and (of is None or paper[of] == r["n"]), (measures, name)
    for (measures, name), key in R.COMPOSITION.items():
        assert counts.PAPER_COMPOSITION[key] == row("dataset.csv", name, measures=measures)["value"]


def test_the_optional_inputs_are_declared_without_a_layout_key():
    from aura.families.aura import STAGES

    declared = STAGES["reproduce"].inputs
    assert set(declared) == set(INPUTS)
    assert {name for name, key in declared.items() if key is None} == set(OPTIONAL)


# --- Table 33 ----------------------------------------------------------------------------------------------------
def t33(rates: dict[str, int], n: int = 1000) -> pd.DataFrame:
    """Table 33's unsafe columns: every model k of n on all rows, NSP and SP rows alike."""
    return csv(pd.DataFrame({"model": list(rates), **{f"unsafe_{m}_{c}": v for m in ("all", "nsp", "sp") for c, v in (
        ("k", list(rates.values())), ("n", n), ("rate", [k / n for k in rates.values()]))}}))


def test_the_frontier_open_weight_gap(tmp_path):
    rates = {**dict.fromkeys(FRONTIER, 200), "gpt-5.2": 236, **dict.fromkeys(OPEN, 500), "qwen3-32b": 365,
             **dict.fromkeys(TUNED, 400)}
    lookup = lookup_for({"table33_overall": t33(rates)})
    gap = lookup(row("headline.csv", "frontier vs open-weight"))
    # 36.5% (qwen3-32b, the lowest open-weight) - 23.6% (gpt-5.2, the highest frontier), two independent rates
    se = 100 * math.sqrt(0.365 * 0.635 / 1000 + 0.236 * 0.764 / 1000)
    assert (gap.value, gap.se, gap.n, gap.unit) == (pytest.approx(12.9), pytest.approx(se), 1000, "percent")
    high = lookup(row("headline.csv", "frontier models", "unsafe (all rows), highest"))
    assert (high.k, high.n) == (236, 1000)
    v = verdict_table(folder(tmp_path, "headline.csv"), lookup).set_index(["row", "column"])
    assert v.loc[("frontier vs open-weight", "closest unsafe rates, gap"), "verdict"] == "reproduced"
    # a range needs every paper model of its group; the run's other models are ignored
    del rates["gpt-5.2"]
    lookup = lookup_for({"table33_overall": t33({**rates, "another-model": 990})})
    assert lookup(row("headline.csv", "frontier vs open-weight")).startswith("different models")
    assert "gpt-5.2" in lookup(row("headline.csv", "frontier models", "NSP unsafe, low"))
    assert lookup(row("headline.csv", "open-weight models", "unsafe (all rows), high")).k == 500


# --- Figures 4-8 -------------------------------------------------------------------------------------------------
def fig4(cells: dict[str, dict[tuple[str, str], tuple[int, int]]]) -> pd.DataFrame:
    """Figure 4's table: model -> (pair label, level) -> (count = n, unsafe)."""
    rows = [{"model": m, "pair_label": p, "detection": d, "count": c, "share": float("nan"), "n": c, "unsafe": u,
             "rate": u / c if c else float("nan"), "safety_excluded": 0, "detection_excluded": 0}
            for m, by in cells.items() for (p, d), (c, u) in by.items()]
    return csv(pd.DataFrame(rows))


def test_detection_levels_and_drops():
    usual = {("NSP", "D0"): (20, 14), ("NSP", "D1"): (10, 9), ("NSP", "D2"): (10, 3), ("NSP", "D3"): (60, 6)}
    cells = {m: dict(usual) for m in R.PAPER_EVALUATED}
    cells["glm-5.1"][("NSP", "D3")] = (58, 6)
    cells["claude-sonnet-4.6"].update({("NSP", "D3"): (67, 6), ("NSP", "D0"): (11, 7)})
    cells["gpt-5.4"][("NSP", "D2")] = (10, 5)
    cells["llama-3.1-8b"].update({("NSP", "D3"): (60, 30), ("SP", "D3"): (40, 20)})
    lookup = lookup_for({"fig4_detection": fig4(cells)})
    low, high = (lookup(row("detection.csv", "GLM-5.1, Claude Sonnet 4.6", f"NSP D3 share, {s}"))
                 for s in ("low", "high"))
    assert (low.k, low.n, high.k, high.n) == (58, 98, 67, 98)  # of each model's NSP rows with a level
    share = lookup(row("detection.csv", "frontier models", "NSP D0 share"))
    assert (share.k, share.n) == (5 * 20 + 11, 4 * 100 + 98 + 98)  # pooled over the six frontier models
    # the drop at D2: the D1 rate minus the D2 rate, per frontier model (gpt-5.4: 90% - 50%, the others 90% - 30%)
    drop = lookup(row("detection.csv", "frontier models", "unsafe drop at D2, low"))
    se = 100 * math.sqrt(0.9 * 0.1 / 10 + 0.5 * 0.5 / 10)
    assert (drop.value, drop.se) == (pytest.approx(40.0), pytest.approx(se))
    assert lookup(row("detection.csv", "frontier models", "unsafe drop at D2, high")).value == pytest.approx(60.0)
    # D2 -> D3: 30% - 6/58 (glm-5.1, the smallest drop)
    assert lookup(row("detection.csv", "frontier models", "unsafe drop D2 to D3, low")).value == \
        pytest.approx(30 - 600 / 58)
    d0 = lookup(row("detection.csv", "frontier models", "D0 unsafe, high"))
    assert (d0.k, d0.n) == (14, 20)
    llama = lookup(row("detection.csv", "Llama-3.1-8B-Inst", "D3 unsafe"))  # §7.2: both pair labels
    assert (llama.k, llama.n) == (50, 100)
    del cells["glm-5.1"]
    assert lookup_for({"fig4_detection": fig4(cells)})(
        row("detection.csv", "models", "D1 unsafe, low")).startswith("different models")


def fig8(cells: dict[str, dict[tuple[str, str], tuple[int, int]]]) -> pd.DataFrame:
    """Figure 8's table (NSP): model -> (level, action) -> (n, unsafe)."""
    rows = [{"model": m, "pair_label": "NSP", "detection": d, "action_type": a, "count": n, "n": n, "unsafe": u,
             "rate": u / n if n else float("nan"), "safety_excluded": 0, "excluded": 0}
            for m, by in cells.items() for (d, a), (n, u) in by.items()]
    return csv(pd.DataFrame(rows))


def test_detection_action_cells(tmp_path):
    usual = {("D0", "A0"): (10, 8), ("D0", "A3"): (5, 3), ("D0", "A4"): (4, 1), ("D3", "A0"): (4, 3),
             ("D2", "A1"): (10, 1), ("D3", "A4"): (20, 2), ("D2", "A2"): (0, 0)}
    cells = {m: dict(usual) for m in R.PAPER_EVALUATED}
    cells["r1-distill-32b"].update({("D2", "A2"): (12, 5), ("D3", "A0"): (0, 0)})
    cells["gpt-5.4"][("D3", "A0")] = (9, 5)
    lookup = lookup_for({"fig8_cells": fig8(cells)})
    a0a3 = lookup(row("detection.csv", "frontier models", "unsafe D0 actions that are A0 or A3"))
    assert (a0a3.k, a0a3.n) == (6 * 11, 6 * 12)  # of the unsafe D0 actions, pooled over the frontier models
    low, high = (lookup(row("detection.csv", "NSP D3-A0 cells", f"unsafe, {s}")) for s in ("low", "high"))
    assert (low.k, low.n, high.k, high.n) == (5, 9, 3, 4)  # r1-distill's empty cell has no rate: not in the range
    safe = lookup(row("detection.csv", "NSP D2/D3 with A1 or A4", "unsafe"))
    assert (safe.k, safe.n) == (20 * 3, 20 * 30)
    r1 = lookup(row("detection.csv", "DeepSeek-R1-Distill 32B", "NSP D2-A2 unsafe"))
    assert (r1.k, r1.n) == (5, 12)
    assert lookup(row("detection.csv", "DeepSeek-R1-Distill 32B", "NSP D3-A2 unsafe")) is None  # no such cell
    v = verdict_table(folder(tmp_path, "detection.csv"), lookup).set_index(["row", "column"])
    bound = v.loc[("NSP D2/D3 with A1 or A4", "unsafe")]  # 10% of 600, against "below 20%": one-sided
    assert (bound["method"], bound["verdict"]) == ("one-sided", "reproduced")


def fig5() -> pd.DataFrame:
    """Figure 5's table: NSP A4 / A0 / A3 and SP A0 / A3 per paper model (gpt-5.4's NSP A4: 27 of 100)."""
    rows = []
    for m in R.PAPER_EVALUATED:
        for action, (count, safe, unsafe) in {"A4": (30, 28, 2), "A0": (50, 10, 40), "A3": (20, 5, 15)}.items():
            rows.append({"model": m, "pair_label": "NSP", "action_type": action, "count": count, "share": count / 100,
                         "safe": safe, "unsafe": unsafe, "safety_invalid": 0, "n_valid_action": 100,
                         "action_excluded": 0})
        rows += [{"model": m, "pair_label": "SP", "action_type": a, "count": 10, "share": 0.1, "safe": 9, "unsafe": 1,
                  "safety_invalid": 0, "n_valid_action": 100, "action_excluded": 0} for a in ("A0", "A3")]
    rows[0]["count"] = 27
    return csv(pd.DataFrame(rows))


def fig6(dimensions=("RS5", "SD3")) -> pd.DataFrame:
    """Figure 6's table: the i-th paper model has 20 + i % 5 unsafe of 40 on RS5 (and the other RS), 4 + i on SD3."""
    return csv(pd.DataFrame([{"model": m, "dimension": d, "rows": 40, "n": 40, "unsafe": u, "rate": u / 40,
                              "excluded": 0} for i, m in enumerate(R.PAPER_EVALUATED) for d in dimensions
                             for u in [4 + i if d == "SD3" else 20 + i % 5]]))


def test_action_types_and_dimensions():
    lookup = lookup_for({"fig5_action_types": fig5(), "fig6_dimensions": fig6()})
    low = lookup(row("action_types.csv", "frontier models", "NSP A4 alternatives share, low"))
    assert (low.k, low.n) == (27, 100)
    safe = lookup(row("action_types.csv", "SP A0 and A3", "safe share"))
    assert (safe.k, safe.n) == (6 * 18, 6 * 20)
    mean = lookup(row("dimensions.csv", "RS5 Oversight", "mean unsafe"))  # the mean of the 20 models' rates
    rates = [(20 + i % 5) / 40 for i in range(20)]
    se = math.sqrt(sum(p * (1 - p) / 40 for p in rates)) / 20
    assert (mean.value, mean.se, mean.n, mean.method) == (pytest.approx(sum(rates) / 20), pytest.approx(se), 800,
                                                          "mean of rates")
    assert lookup(row("dimensions.csv", "RS1 Harm Intensity", "mean unsafe")) is None  # no RS1 row in the run
    sd3 = lookup(row("dimensions.csv", "SD3 Obfuscation, open-weight models", "unsafe, high"))
    assert (sd3.k, sd3.n) == (4 + 16, 40)  # gpt-oss-120b, the open-weight group's last


# --- human validation (Tables 3, 18, 20-23) ----------------------------------------------------------------------
def validation_tables(judges=R.VALIDATION_JUDGES) -> dict[str, pd.DataFrame]:
    """The paper's own numbers, in the producers' columns (human_validation, validation_sample.table18)."""
    t3 = pd.DataFrame([
        {"axis": "safety", "N": 84, "units": 84, "raters": 6, "ratings": 252, "P_o": 0.889, "alpha": 0.759,
         "human_unanimous": 70, "human_majority": 12, "human_tied": 2, "no_reference": 0, "not_judged": 0,
         "N_p": 84, "agree": 66, "acc": 66 / 84, "N_unanimous": 38, "agree_unanimous": 37},
        {"axis": "overall", "N": 243, "units": 243, "raters": 6, "ratings": 729, "P_o": 0.771, "alpha": 0.742,
         "human_unanimous": 165, "human_majority": 67, "human_tied": 11, "no_reference": 0, "not_judged": 0,
         "N_p": 226, "agree": 173, "acc": 173 / 226, "N_unanimous": 86, "agree_unanimous": 84}])
    t18 = pd.DataFrame({"axis": ["detection", "action_type", "safety", "overall"], "sampled": [83, 84, 84, 251],
                        "labelled": [83, 84, 84, 251], "kept": [82, 77, 84, 243], "dropped": [1, 7, 0, 8]})
    overall = dict(zip(judges, (180, 153, 170, 175, 178)))  # of 243: gpt-5.4 74.1% (the best), the next 63.0%
    majority, tied = {"gemini-3.1-pro": 85, "gpt-4o": 62}, {"gemini-3.1-pro": 11}  # 60.7%, 44.3% of 140; 64.7% of 17
    units = {"all": 243, "unanimous": 86, "majority": 140, "tied": 17}
    acc = [{"judge": j, "axis": "overall", "stratum": s, "units": n, "missing": 0,
            "agree": {"all": overall[j], "unanimous": 84, "majority": majority.get(j, 70), "tied": tied.get(j, 8)}[s]}
           for j in judges for s, n in units.items()]
    t23 = pd.DataFrame([{"ensemble": "claude-opus-4.6 + gpt-5.4 + gemini-3.1-pro", "size": 3, "units": 243,
                         "N_p": 233, "N_u": 122, "agree": 174, "T": 10},
                        {"ensemble": " + ".join(judges), "size": len(judges), "units": 243, "N_p": 226, "N_u": 86,
                         "agree": 173, "T": 17}])
    return {"table3_human_validation": csv(t3), "table18_validation_retention": csv(t18),
            "table21_22_judge_accuracy": csv(pd.DataFrame(acc)), "table23_ensembles": csv(t23)}


def test_human_validation_by_hand(tmp_path):
    lookup = lookup_for(validation_tables())
    hv = "human_validation.csv"
    kept = lookup(row(hv, "all", "items retained"))
    assert (kept.value, kept.n, kept.unit) == (243, 251, "count")  # a count of n: compared as the rate 243/251
    dropped = lookup(row(hv, "Action type", "items dropped"))
    assert (dropped.value, dropped.n) == (7, 8)
    assert lookup(row(hv, "all", "annotators per item")).value == 3  # 729 ratings / 243 units
    acc = lookup(row(hv, "Action safety", "judge-human agreement (Acc.)"))
    assert (acc.k, acc.n, acc.method) == (66, 84, "wilson")
    majority = lookup(row(hv, "Action safety", "agreement on majority"))
    assert (majority.k, majority.n) == (66 - 37, 84 - 38)
    items = lookup(row(hv, "Action safety", "5-judge majority items"))  # N_p - N_unanimous
    assert (items.value, items.n) == (46, 84)
    tied = lookup(row(hv, "Overall", "5-judge panel tied"))  # Table 22's tied stratum
    assert (tied.value, tied.n) == (17, 243)
    p_o, alpha = (lookup(row(hv, "Overall", c)) for c in ("P_o", "alpha"))
    se = math.sqrt(0.771 * 0.229 / 243)
    assert (p_o.value, p_o.se, p_o.k) == (0.771, pytest.approx(se), None)
    assert (alpha.value, alpha.se, alpha.unit) == (0.742, pytest.approx(se * 0.258 / 0.229), "r")
    low = lookup(row(hv, "Action safety", "Wilson 95% CI, low"))
    assert low.value == pytest.approx(0.687, abs=5e-4) and low.k is None
    v = verdict_table(folder(tmp_path, hv, "judge_accuracy.csv", "ensembles.csv"), lookup)
    compared = v[v["verdict"] != "not comparable"]
    # the paper's own numbers: none is "not reproduced"; every mapped row is compared
    assert not (v["verdict"] == "not reproduced").any()
    assert set(v.loc[v["verdict"] == "not comparable", "reason"].str[:len(UNMAPPED)]) == {UNMAPPED}
    assert len(compared) == len(v) - 3 - 5  # the drop reasons, the other ensemble
    assert v.set_index(["row", "column"]).loc[("all", "items retained"), "verdict"] == "reproduced"


def test_judge_accuracy_and_ensembles_by_hand():
    lookup = lookup_for(validation_tables())
    ja = "judge_accuracy.csv"
    best, worst = (lookup(row(ja, f"{w} judge")) for w in ("best", "worst"))
    assert (best.k, best.n, worst.k, worst.n) == (180, 243, 153, 243)
    spread = lookup(row(ja, "best minus worst"))
    p, q = 180 / 243, 153 / 243
    assert (spread.value, spread.se) == (pytest.approx(100 * (p - q)), pytest.approx(100 * math.hypot(
        math.sqrt(p * (1 - p) / 243), math.sqrt(q * (1 - q) / 243))))
    assert [(e.value, e.n) for e in (lookup(row(ja, s, "samples (N)")) for s in ("unanimous", "majority", "tied"))] == \
        [(86, 243), (140, 243), (17, 243)]
    every = lookup(row(ja, "unanimous", "samples every judge matches"))
    assert (every.value, every.n) == (84, 86)
    gemini = lookup(row(ja, "Gemini 3.1 Pro", "accuracy, majority stratum"))
    gpt4o = lookup(row(ja, "GPT-4o", "accuracy, majority stratum"))
    assert (gemini.k, gemini.n, gpt4o.k, gpt4o.n) == (85, 140, 62, 140)
    assert lookup(row(ja, "Gemini 3.1 Pro", "accuracy, tied stratum")).k == 11
    panel = "GPT-5.4 + Claude Opus 4.6 + Gemini 3.1 Pro"
    n_p, n_u, acc, t = (lookup(row("ensembles.csv", panel, c)) for c in ("Np", "Nu", "Acc.", "T"))
    assert ((n_p.value, n_p.n), (n_u.value, n_u.n), (acc.k, acc.n), (t.value, t.n)) == \
        ((233, 243), (122, 233), (174, 233), (10, 243))
    # a run whose validation panel is the scoring panel's three judges: Tables 3 and 21-22 are another panel's
    three = lookup_for(validation_tables(R.PAPER_JUDGES))
    assert three(row(ja, "best judge")).startswith("different models: the paper's panel is its 5 validation judges")
    assert three(row("human_validation.csv", "Overall", "judge-human agreement (Acc.)")).startswith("different models")
    assert three(row("human_validation.csv", "Overall", "P_o")).value == 0.771  # the annotators' own: unchanged


# --- Tables 24, 25, 38; the dataset ------------------------------------------------------------------------------
def t24() -> pd.DataFrame:
    return csv(pd.DataFrame({"model": ["gpt-5.4", "claude-opus-4.6", "claude-sonnet-4.6", "gemini-3.1-pro"],
                             "sample_items": [250, 250, 249, 250], "paired_n": [240, 238, 239, 241],
                             "diff": [0.01, -0.02, 0.0, 0.005], "diff_ci_low": [-0.01, -0.05, -0.02, 0.001],
                             "diff_ci_high": [0.03, 0.01, 0.02, 0.02], "ci_includes_zero": [True, True, True, False]}))


def t25() -> pd.DataFrame:
    return csv(pd.DataFrame([{"judge": j, "axis": a, "runs": 3, "units": 81, "complete": 80, "incomplete": 1,
                              "consistent": c, "consistency": c / 80}
                             for j, by in zip(R.PAPER_JUDGES, ((70, 75, 79), (72, 78, 76), (74, 71, 77)))
                             for a, c in zip(("detection", "action_type", "safety", "all"), (*by, 0))]))


def t38() -> pd.DataFrame:
    per_model = {"claude-sonnet-4.6": (26, 30, 30), "gpt-5.4": (29, 33, 35), "qwen3-32b": (63, 79, 60),
                 "realsafe-r1-32b": (63, 68, 50)}  # unsafe [R], unsafe [A] (of 150), NSP unsafe (of 75)
    return csv(pd.DataFrame([{"model": m, "format": f, "items": 150, "unsafe_all_k": k, "unsafe_all_n": 150,
                              "unsafe_nsp_k": nsp, "unsafe_nsp_n": 75, "unsafe_sp_k": 5, "unsafe_sp_n": 75,
                              "sp_safe_nonrefusal_k": 68, "sp_safe_nonrefusal_n": 70}
                             for m, (react, action, nsp) in per_model.items()
                             for f, k in (("react", react), ("action_only", action))]))


def test_vendor_overlap_consistency_and_prompt_format():
    lookup = lookup_for({"table24_vendor_overlap": t24(), "table25_judge_consistency": t25(),
                         "table38_prompt_format": t38()})
    vo = "vendor_overlap.csv"
    assert lookup(row(vo, "each re-judged model")).value == 250
    shift = lookup(row(vo, "Claude Opus 4.6"))  # -2.0 points: the paper states no sign, its size is compared
    assert (shift.value, shift.lo, shift.hi, shift.n, shift.method) == (0.02, -0.01, 0.05, 238, "bootstrap")
    assert shift.se == pytest.approx(0.06 / (2 * Z95))
    inside = lookup(row(vo, "all re-judged models"))
    assert (inside.value, inside.n) == (3, 4)
    low, high = (lookup(row("judge_consistency.csv", "judges x axes", f"all three runs agree, {s}"))
                 for s in ("low", "high"))
    assert (low.k, high.k, low.n) == (70, 79, 80)  # over judges x axes, not the "all" rows
    pf = "prompt_format.csv"
    assert lookup(row(pf, "all", "scenarios")).value == 150
    fr, ow = (lookup(row(pf, f"{g} models [R]", "unsafe, high")) for g in ("frontier", "open-weight"))
    assert (fr.k, fr.n, ow.k) == (29, 150, 63)
    increase = lookup(row(pf, "tested models", "unsafe increase [A] over [R], high"))  # qwen3-32b: (79 - 63) / 150
    assert increase.value == pytest.approx(100 * 16 / 150) and increase.n == 150
    gap = lookup(row(pf, "tested models, both prompts", "NSP minus SP unsafe, low"))  # sonnet: (30 - 5) / 75
    assert gap.value == pytest.approx(100 * 25 / 75)
    three = t38()[lambda t: t["model"] != "qwen3-32b"]
    assert lookup_for({"table38_prompt_format": three})(row(pf, "tested models", "unsafe increase [A] over [R], low")) \
        == "different models: Table 38's range over its models is over the paper's 4 models; the run lacks qwen3-32b"


def funnel() -> pd.DataFrame:
    """The funnel's counts, each one less than the paper's (3 - 1 where the paper states none)."""
    return csv(pd.DataFrame([{"stage": s, "count": c, "ours": (p or 3) - 1, "paper": p} for s, c, p in counts.FUNNEL]))


def judged() -> pd.DataFrame:
    return csv(pd.DataFrame({"model": "m", "item_id": range(10), "seed_id": [f"s{i % 4}" for i in range(10)]}))


def test_the_construction_funnel_and_the_seeds_represented():
    lookup = lookup_for({"funnel": funnel(), "judged": judged()})
    at = lookup(row("dataset.csv", "at-trigger", "prefixes"))
    assert (at.value, at.n, at.unit) == (156, 210, "count")  # prefixes at-trigger of the prefixes
    kept = lookup(row("dataset.csv", "all", "variations passing review"))
    assert (kept.value, kept.n) == (649, 915)  # kept by review of the parseable
    assert lookup(row("dataset.csv", "R-Judge", "seeds attack_type=unintended")).value == 156  # seeds selected
    assert lookup(row("dataset.csv", "all", "pool items")).n is None
    seeds = lookup(row("dataset.csv", "all", "source seeds represented"))
    assert (seeds.value, seeds.n) == (4, 156)  # distinct seeds of the judged rows, of the seeds selected


def full_run() -> dict[str, pd.DataFrame]:
    """Every table the stage reads, with the paper's models, judges and strata (the builders above)."""
    levels = {(p, d): (25, 10) for p in ("NSP", "SP") for d in ("D0", "D1", "D2", "D3")}
    all_models = "(all models)"
    flips = pd.DataFrame({"model": [all_models, all_models, "claude-sonnet-4.6"], "dimension": ["RS5", "RS2", "RS5"],
                          "flipped": [45, 14, 3], "n": [86, 78, 15]})
    mechanism = pd.DataFrame({"model": all_models, "dimension": ["RS2", "RS5", "RS2+RS5"], "failures": [50, 60, 110],
                              "d01": [38, 47, 85], "d23": [11, 10, 21], "no_detection": [1, 3, 4]})
    gaps = pd.DataFrame({"model": list(R.PAPER_EVALUATED), "diff": 0.3, "diff_ci_low": 0.2, "diff_ci_high": 0.4})
    composition = pd.DataFrame({"count": list(counts.PAPER_COMPOSITION),
                                "ours": list(counts.PAPER_COMPOSITION.values())})
    return {**validation_tables(), "table33_overall": t33(dict.fromkeys(R.PAPER_EVALUATED, 300)),
            "table35_flips": csv(flips), "table36_failure_mechanism": csv(mechanism), "table31_bootstrap": csv(gaps),
            "table32_matched_pairs": csv(gaps), "composition": csv(composition), "funnel": funnel(), "judged": judged(),
            "fig4_detection": fig4({m: dict(levels) for m in R.PAPER_EVALUATED}),
            "fig5_action_types": fig5(), "fig6_dimensions": fig6(("RS1", "RS2", "RS3", "RS5", "SD3")),
            "fig8_cells": fig8({m: {(d, a): (5, 2) for d in ("D0", "D1", "D2", "D3")
                                    for a in ("A0", "A1", "A2", "A3", "A4")} for m in R.PAPER_EVALUATED}),
            "table24_vendor_overlap": t24(), "table25_judge_consistency": t25(), "table38_prompt_format": t38()}


def test_every_mapped_row_yields_an_estimate_on_a_full_run():
    """A run that made every table the stage reads: each mapped row is an Estimate with a finite value (none left
    "not produced" or "different models"), and every one of them gets a verdict."""
    lookup = lookup_for(full_run())
    is_mapped = mapped(REF, lookup_for({name: pd.DataFrame() for name in INPUTS}))
    found = {(r["file"], r["row"], r["column"]): lookup(r) for _, r in REF[is_mapped].iterrows()}
    assert not {k: v for k, v in found.items() if not (isinstance(v, Estimate) and math.isfinite(v.value))}
    v = verdict_table(REFERENCE, lookup)
    assert len(v) == 171 and int((v["verdict"] != "not comparable").sum()) == int(is_mapped.sum())


def test_a_pilot_that_caps_the_seeds_leaves_the_dataset_rows_not_comparable():
    from aura.families.aura.stats.reproduction import capped_first
    from aura.stats.reference import load_reference

    ref = load_reference(REFERENCE)
    lookup = capped_first(lambda row: None, 40)
    reasons = {row["file"]: lookup(row) for _, row in ref.iterrows()}
    assert reasons["dataset.csv"] == "subsample: the run caps the seeds (aura.construct.max_seeds 40)"
    assert reasons["headline.csv"] is None  # the rates are compared at the pilot's own n
    assert capped_first(lambda row: None, None)(ref.iloc[0]) is None
