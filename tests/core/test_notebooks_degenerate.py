"""Issue 8 §3: every report notebook renders degenerate results, and the stats stages accept empty input.

The stats-stage inputs of each notebook are produced by the real stats functions (paper-stats, model-rates,
format-stats, reliability, human validation, consistency, vendor overlap, construction composition) from small
synthetic panels built below, for five cases:

- ``all_safe``: every judge says Safe / D2 / A2 (A0 on Safe-Path items) on every item;
- ``all_unsafe``: every judge says Unsafe / D0 / A0;
- ``single_item``: one model, one NSP original, labelled D3 / A4 / Safe;
- ``all_unresolved``: the three judges disagree on every axis (D0/D1/D2, A0/A1/A2, Safe/Unsafe/no answer),
  so every panel label is ``unresolved``;
- ``empty``: no item survived construction (every table empty, with its header).

Every notebook in ``REPORTS`` is then rendered on every case as a `render_<name>` job renders it
(`aura.pipeline.render.render`: papermill with the in-process kernel, here in the test's own process; one kernel
process reset before each notebook cost 1.7 times the CPU, most of it the reset's full garbage collection of the
kernel's heap); each must finish and leave its table(s) / figure. One real ``python -m aura render`` run covers
the command path on the case that crashed before (a model judged Safe everywhere: Wilson lower bound 2.8e-17 above
a rate of 0 gave a negative error bar).
"""
from __future__ import annotations

import gc
import subprocess
import sys
from pathlib import Path

import matplotlib.pyplot as plt
import nbformat
import pandas as pd
import pytest

from aura.config import validate_config
from aura.families import family_of_report
from aura.families.aura.construct.counts import composition
from aura.families.aura.evaluate.format_sample import format_table
from aura.families.aura.evaluate.panel import majority
from aura.families.aura.notebooks import TABLE33_TITLES, table33_cells
from aura.notebook_helpers import display_names, error_bars, read, share_cell, write_table
from aura.pipeline.render import render
from aura.families.aura.construct.leak_probe import summarize as leak_summary
from aura.families.aura.reports import REPORTS  # AURA's reports; the other families test their own notebooks
from aura.families.aura.stats import consistency, metrics, rates, reliability, tables, vendor_overlap
from aura.families.aura.stats.human_validation import consensus, ensemble_sensitivity, human_validation, judge_accuracy, units
from aura.families.aura.stats.validation_sample import SAMPLE_COLUMNS, table18, table19
from conftest import base_config

REPO = Path(__file__).resolve().parents[2]
CASES = ["all_safe", "all_unsafe", "single_item", "all_unresolved", "empty"]
JUDGES = ["j1", "j2", "j3"]
AXES = ["detection", "action_type", "safety"]
RESAMPLES = 20


# ---- synthetic inputs -------------------------------------------------------------------------------------

def dataset(case: str) -> list[dict]:
    """Two seeds x (NSP original, its SP counterpart, RS2 and RS5 variations of the original), and a third
    seed's unpaired NSP original: 9 rows, 7 NSP. (Wilson's lower bound for 0/7 and 0/9 is 2.8e-17, not 0.)"""
    if case == "empty":
        return []
    rows = []
    for s in ("S1", "S2"):
        base = {"seed_id": s, "prefix_kind": "at_trigger", "domain": "IoT"}
        rows += [{**base, "item_id": f"{s}-o", "pair_label": "NSP", "dimension": "original", "pair_id": f"P{s}",
                  "pair_role": "source", "pair_side": "source"},
                 {**base, "item_id": f"{s}-c", "pair_label": "SP", "dimension": "original", "pair_id": f"P{s}",
                  "pair_role": "counterpart", "pair_side": "counterpart"},
                 {**base, "item_id": f"{s}-rs2", "pair_label": "NSP", "dimension": "RS2", "pair_id": None,
                  "pair_role": None, "pair_side": "source"},
                 {**base, "item_id": f"{s}-rs5", "pair_label": "NSP", "dimension": "RS5", "pair_id": None,
                  "pair_role": None}]
    rows.append({"seed_id": "S3", "prefix_kind": "pre_execution", "domain": "Web", "item_id": "S3-o",
                 "pair_label": "NSP", "dimension": "original", "pair_id": None, "pair_role": None,
                 "pair_side": "source"})
    return rows[:1] if case == "single_item" else rows


def models(case: str) -> list[str]:
    return [] if case == "empty" else ["mA"] if case == "single_item" else ["mA", "mB"]


def votes(case: str, axis: str, item: dict) -> list[str | None]:
    if case == "all_unresolved":
        return {"detection": ["D0", "D1", "D2"], "action_type": ["A0", "A1", "A2"],
                "safety": ["Safe", "Unsafe", None]}[axis]
    label = {"all_safe": {"detection": "D2", "action_type": "A0" if item["pair_label"] == "SP" else "A2",
                          "safety": "Safe"},
             "all_unsafe": {"detection": "D0", "action_type": "A0", "safety": "Unsafe"},
             "single_item": {"detection": "D3", "action_type": "A4", "safety": "Safe"}}[case][axis]
    return [label] * len(JUDGES)


def panel(case: str, axes=AXES) -> list[dict]:
    """Panel rows as the panel stage writes them: majority labels and the judges' votes."""
    rows = []
    for m in models(case):
        for it in dataset(case):
            row = {"item_id": it["item_id"], "model": m, "rollout_status": "ok"}
            for axis in AXES:
                if axis not in axes:
                    row[axis], row[f"{axis}_votes"] = "not_judged", {}
                    continue
                v = votes(case, axis, it)
                row[axis], row[f"{axis}_votes"] = majority(v, len(JUDGES)), dict(zip(JUDGES, v))
            rows.append(row)
    return rows


def human(case: str) -> pd.DataFrame:
    """Three annotators per (model, item, axis): the panel's label, or a three-way tie where it has none."""
    rows = []
    for p in panel(case):
        for axis in AXES:
            labels = [p[axis]] * 3 if p[axis] != "unresolved" else [v or "Safe" for v in votes(case, axis, {})]
            rows += [{"model": p["model"], "item_id": p["item_id"], "axis": axis, "annotator": f"h{k}", "label": lab}
                     for k, lab in enumerate(labels)]
    return pd.DataFrame(rows, columns=["model", "item_id", "axis", "annotator", "label"])


def judgments(case: str, runs: int = 2) -> list[dict]:
    """Every judge's label, repeated `runs` times (run 0 = the main judging)."""
    out = []
    for p in panel(case):
        for axis in AXES:
            for judge, label in p[f"{axis}_votes"].items():
                out += [{"model": p["model"], "item_id": p["item_id"], "axis": axis, "judge": judge, "run": r,
                         "label": label, "status": "ok" if label else "unparsed"} for r in range(runs)]
    return out


def config(tmp: Path):
    raw = base_config("http://127.0.0.1:9/v1", tmp / "cache")
    for m, group in (("mA", "frontier"), ("mB", "open-weight")):
        raw["models"][m] = {**raw["models"]["m"], "label": f"Model {m[-1]}", "group": group}
    return validate_config(raw)


def write_stats(case: str, out: Path) -> dict[str, Path]:
    """Every CSV the report notebooks read, from the real stats functions. Returns layout key -> path."""
    cfg = config(out)
    out.mkdir(parents=True, exist_ok=True)
    ds = pd.DataFrame(dataset(case), columns=[*tables.DATASET_COLUMNS])
    pn = pd.DataFrame(panel(case), columns=[*tables.PANEL_COLUMNS, *[f"{a}_votes" for a in AXES]])
    judged = tables.judged_table(pn, ds)
    csvs = dict(tables.compute(judged, RESAMPLES, 42, None))
    # rates.model_rates needs at least one panel row (see the report); an empty model-rates file stands in
    csvs["model_rates"] = rates.model_rates(pn, ds, cfg.models) if len(pn) else None
    react = [(m, "react", pn[pn["model"] == m]) for m in models(case)]
    action_only = pd.DataFrame(panel(case, axes=["action_type", "safety"]), columns=pn.columns)
    csvs["table38_prompt_format"] = format_table(ds, [*react, *[(m, "action_only", action_only[action_only["model"] == m])
                                                                for m in models(case)]])
    rows, hl = panel(case), human(case)
    csvs["judge_reliability"] = reliability.judge_reliability(rows)
    csvs["table3_human_validation"] = human_validation(hl, rows, JUDGES)
    csvs["table21_22_judge_accuracy"] = judge_accuracy(hl, rows, JUDGES)
    csvs["table23_ensembles"] = ensemble_sensitivity(hl, rows, JUDGES, JUDGES)
    vsample = pd.DataFrame([{"model": r["model"], "item_id": r["item_id"], "axis": a,  # every judged unit drawn
                             "agreement": consensus(list(r[f"{a}_votes"].values()))}
                            for r in rows if r["rollout_status"] == "ok" for a in AXES if r[f"{a}_votes"]],
                           columns=SAMPLE_COLUMNS)
    csvs["table18_validation_retention"] = table18(vsample, units(hl, rows, JUDGES))
    csvs["table19_validation_strata"] = table19(vsample, units(hl, rows, JUDGES))
    csvs["table25_judge_consistency"] = tables.with_models(
        consistency.consistency(judgments(case), set(ds["item_id"]), 2), cfg, column="judge")
    repl = [{**j, "judge": "jR"} for j in judgments(case, runs=1) if j["judge"] == "j1"]
    csvs["table24_vendor_overlap"] = vendor_overlap.table24({m: [r for r in rows if r["model"] == m] for m in models(case)},
                                                            repl, dataset(case), JUDGES,
                                                            {m: ["j1"] for m in models(case)}, RESAMPLES, 42)
    comp = composition(dataset(case))
    csvs["construction_composition"] = pd.DataFrame({"count": list(comp), "ours": list(comp.values()), "paper": None})
    csvs["construction_funnel"] = pd.DataFrame(columns=["stage", "ours", "paper"])
    csvs["leak_probe_summary"] = leak_summary([{**r, "guess": r["pair_label"]} for r in dataset(case)])
    paths = {}
    for name, table in csvs.items():
        paths[name] = out / f"{name}.csv"
        if table is None:  # a zero-byte file: the notebooks' EmptyDataError path
            paths[name].write_text("")
            continue
        if name != "construction_composition" and "model" in table.columns and "label" not in table.columns:
            table = tables.with_models(table, cfg)
        table.to_csv(paths[name], index=False)
    return paths


# ---- the stats stages on empty input ----------------------------------------------------------------------

def test_stats_functions_on_empty_input_give_empty_tables_with_headers(tmp_path):
    paths = write_stats("empty", tmp_path)
    for name in ["table33_overall", "table35_flips", "table36_failure_mechanism", "table37_top_combinations",
                 "fig4_detection", "fig5_action_types", "fig6_dimensions", "fig8_cells", "table38_prompt_format"]:
        df = pd.read_csv(paths[name])
        assert "model" in df.columns and len(df.columns) > 3, name
    t36 = pd.read_csv(paths["table36_failure_mechanism"])
    assert (t36["failures"] == 0).all()  # only the pooled rows, each with no failure
    assert set(metrics.table33(pd.DataFrame(columns=list(metrics.REQUIRED))).columns) <= set(
        pd.read_csv(paths["table33_overall"]).columns)


def test_paper_stats_stage_writes_empty_labelled_tables(tmp_path):
    """`python -m aura paper-stats` with an empty dataset and panel: every CSV written with its header."""
    import yaml

    from aura.cli import main
    from aura.families.aura.layout import PAPER_STATS

    raw = base_config("http://127.0.0.1:9/v1", tmp_path / "cache")
    cfg = tmp_path / "config.yaml"
    cfg.write_text(yaml.safe_dump(raw))
    (tmp_path / "dataset.jsonl").write_text("")
    (tmp_path / "panel.jsonl").write_text("")
    outs = [x for n in PAPER_STATS for x in ("--out", f"{n}={tmp_path}/stats/{n}.csv")]
    assert main(["paper-stats", "--configfile", str(cfg), "--in", f"dataset={tmp_path}/dataset.jsonl",
                 "--in", f"panel_0={tmp_path}/panel.jsonl", *outs]) == 0
    t33 = pd.read_csv(tmp_path / "stats" / "table33_overall.csv")
    assert t33.empty and "sp_overrefusal_n" in t33.columns and "label" in t33.columns


# ---- rendering --------------------------------------------------------------------------------------------

def test_error_bars_are_clipped_at_zero():
    # a Wilson interval for 0/12 computed in floating point: lower bound 2.8e-17 above the rate 0
    err = error_bars([0.0, 50.0, float("nan")], [2.8e-17, 40.0, float("nan")], [24.2, 60.0, float("nan")])
    assert err.tolist() == [[0.0, 10.0, 0.0], [24.2, 10.0, 0.0]]


def test_bars_tell_a_measured_zero_from_nothing_measured():
    from aura.notebook_helpers import bars

    fig = bars(["a", "b", "c"], [("rate", "#333333", [0.0, float("nan"), 0.5], None, None)], "rate (%)")
    ax = fig.axes[0]
    assert [round(p.get_height(), 6) for p in ax.patches] == [0.0, 0.0, 50.0]  # NaN is no bar, not a zero bar
    assert sorted((round(t.get_position()[0], 3), t.get_text()) for t in ax.texts) == [(0.0, "0%"), (1.0, "–")]


def test_helpers_read_and_write_empty_and_unlabelled_tables(tmp_path, capsys):
    (tmp_path / "zero.csv").write_text("")  # a stage that wrote nothing at all
    df = read(tmp_path / "zero.csv", columns=["rate"])
    assert df.empty and {"model", "label", "group", "mark", "rate"} <= set(df.columns)
    assert "zero.csv: no rows" in capsys.readouterr().out
    (tmp_path / "rates.csv").write_text("model,label,group\nmA,Model A,frontier\nmB,,\n")
    df = read(tmp_path / "rates.csv")
    assert display_names(df) == {"mA": "★ Model A", "mB": "mB"}  # mark from the group; label falls back to id
    md = write_table(pd.DataFrame(columns=["Model", "Unsafe %"]), "t", tmp_path, notes=["note"])
    assert md.read_text().splitlines()[0].startswith("| Model") and "No rows" in md.read_text()
    # share cells: k/n with the excluded count; n = 0 gives a dash, a missing n (not applicable) "n/a"
    assert share_cell(1, 3, 2) == "33.3 (1/3, excl. 2)" and share_cell(0, 0, 9) == "– (excl. 9)"
    row = {f"{m}_{k}": v for m in TABLE33_TITLES for k, v in (("k", 1), ("n", 4), ("excluded", 0))}
    row.update({"nsp_risk_aware_k": float("nan"), "nsp_risk_aware_n": float("nan"), "nsp_risk_aware_excluded": float("nan")})
    cells = table33_cells(pd.DataFrame([row])).iloc[0]
    assert cells["Unsafe % (all)"] == "25.0 (1/4, excl. 0)" and cells["NSP risk aware % [D2/D3]"] == "n/a"


def params(name: str, paths: dict[str, Path], out: Path) -> dict[str, str]:
    spec = REPORTS[name]
    p = {key: str(paths[key]) for key in spec["inputs"]}
    if spec.get("figure", True):
        p.update(out_pdf=str(out / "figures" / f"{name}.pdf"), out_png=str(out / "figures" / f"{name}.png"))
    p["tables_dir"] = str(out / "tables")
    return p


def expected_outputs(name: str, out: Path) -> list[Path]:
    spec = REPORTS[name]
    files = [out / "figures" / f"{name}.pdf", out / "figures" / f"{name}.png"] if spec.get("figure", True) else []
    return files + [out / "tables" / f"{t}.{ext}" for t in spec.get("tables", []) for ext in ("csv", "md")]


@pytest.fixture(scope="module", autouse=True)
def frozen_heap():
    """What this worker has loaded stays out of the garbage collector's passes while its notebooks render
    (gc.freeze, as the job server does before it forks a job): each render ends with IPython's full collection
    (the shell's reset), which otherwise walks the whole worker's heap (0.22 s a notebook, most of a table's)."""
    gc.freeze()
    yield
    gc.unfreeze()


def execute(name: str, parameters: dict[str, str], out: Path) -> nbformat.NotebookNode:
    """Render `name` as its job does (a failing cell raises papermill's error with the notebook's traceback);
    the executed notebook. Figures a notebook left open are closed (they would stay in this process's pyplot)."""
    out.mkdir(parents=True, exist_ok=True)
    try:
        render(family_of_report(name).notebook(name), out / "executed.ipynb", parameters)
    finally:
        plt.close("all")
    return nbformat.read(out / "executed.ipynb", as_version=4)


def no_rows(path: Path) -> bool:
    try:
        return pd.read_csv(path).empty
    except pd.errors.EmptyDataError:
        return True


def output_text(nb: nbformat.NotebookNode) -> str:
    return "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))


# Cases that add nothing for a notebook are skipped to keep the test fast: the construction counts do not
# depend on labels (single item and empty only), and for the judge-agreement tables (panel votes, human labels,
# repeats) all-unsafe is the same unanimous vote pattern as all-safe.
LABEL_FREE = {"construction_funnel", "leak_probe"}  # the probe depends on pair labels only, not on judge labels
VOTE_PATTERN_ONLY = {"judge_reliability", "table3_human_validation", "table21_22_judge_accuracy", "table23_ensembles",
                     "table24_vendor_overlap", "table25_judge_consistency", "table34_case_study",
                     "table18_validation_retention", "table19_validation_strata"}


def notebooks_for(case: str) -> list[str]:
    return [name for name in REPORTS
            if not (name in LABEL_FREE and case not in ("single_item", "empty"))
            and not (name in VOTE_PATTERN_ONLY and case == "all_unsafe")]


@pytest.mark.parametrize("case", CASES)
def test_every_notebook_renders(tmp_path, case):
    paths = write_stats(case, tmp_path / "stats")
    for name in notebooks_for(case):
        out = tmp_path / name
        nb = execute(name, params(name, paths, out), out)
        for f in expected_outputs(name, out):
            assert f.exists() and f.stat().st_size > 0, f"{case}: {name} did not write {f.name}"
        if all(no_rows(paths[key]) for key in REPORTS[name]["inputs"]):  # says why it is empty
            assert "no rows" in output_text(nb), (case, name)
    t33 = pd.read_csv(tmp_path / "table33_overall" / "tables" / "table33_overall.csv")
    if case == "all_safe":  # every SP row Safe with A0: non-refusal 100%, over-refusal 0% of 2 SP rows each
        assert set(t33["SP safe non-refusal % [of SP Safe: ≠A5]"]) == {"100.0 (2/2, excl. 0)"}
        assert set(t33["SP over-refusal % [of SP Safe: A5]"]) == {"0.0 (0/2, excl. 0)"}
    if case == "all_unresolved":  # nothing labelled: every cell "–", every SP row excluded
        assert set(t33["Unsafe % (all)"]) == {"– (excl. 9)"}
    if case == "empty":
        assert t33.empty and "Unsafe % (all)" in t33.columns


def test_aura_render_draws_the_all_safe_unsafe_rates_figure(tmp_path):
    paths = write_stats("all_safe", tmp_path / "stats")
    rates_csv = pd.read_csv(paths["model_rates"])
    # the case that crashed: rate 0 of 9 rows, Wilson lower bound 2.8e-17 above it (a negative error bar)
    assert (rates_csv["all_rate"] == 0).all() and (rates_csv["all_n"] == 9).all() and (rates_csv["all_ci_low"] > 0).all()
    name = "unsafe_rates"
    args = [x for k, v in params(name, paths, tmp_path).items() for x in ("-p", k, v)]
    proc = subprocess.run([sys.executable, "-m", "aura", "render", str(family_of_report(name).notebook(name)),
                           str(tmp_path / "ran.ipynb"), *args], capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (tmp_path / "figures" / "unsafe_rates.pdf").stat().st_size > 0


# ---- PaSBench (notebooks/pasbench/): the same pattern over the family's stats (aura.families.pasbench.stats) ----
# Cases: two models on 3 text + 2 image items with N = 4 (mV with vision: some samples detected, one unparsed
# judgment; mT without: its image items not applicable); nothing detected; only image items for a vision-less
# model (every sample n/a); one text item, one model, one sample; no judged row at all.
PAS_CASES = ["mixed", "none_detected", "all_not_applicable", "single_sample", "empty"]


def pas_items(case: str) -> list[dict]:
    if case == "empty":
        return []
    text = [{"item_id": f"text-000{i}", "modality": "text", "safety_knowledge": f"K{i}", "words": w, "n_images": 0,
             "severity": sev} for i, (w, sev) in enumerate([(450, "critical"), (550, "warning"), (120, "info")])]
    image = [{"item_id": f"image-000{i}", "modality": "image", "safety_knowledge": f"K{i}", "words": None,
              "n_images": n, "severity": sev} for i, (n, sev) in enumerate([(2, "critical"), (3, "warning")])]
    return {"all_not_applicable": image, "single_sample": text[:1]}.get(case, text + image)


def pas_judgments(case: str) -> list[dict]:
    models = {"all_not_applicable": [("mT", False)], "single_sample": [("mV", True)]}.get(case, [("mV", True), ("mT", False)])
    samples = 1 if case == "single_sample" else 4
    rows = []
    for it in pas_items(case):
        for model, vision in models:
            for s in range(samples):
                na = it["modality"] == "image" and not vision
                unparsed = case == "mixed" and model == "mV" and s == 3
                detected = None if na or unparsed else (case != "none_detected" and s <= int(it["item_id"][-1]))
                rows.append({"item_id": it["item_id"], "model": model, "sample": s, "modality": it["modality"],
                             "status": "not_applicable" if na else "unparsed" if unparsed else "ok", "detected": detected})
    return rows


def pas_write_stats(case: str, out: Path) -> dict[str, Path]:
    """Every PaSBench stats CSV from the real stats code; probe rows follow the judgments (reactive on each
    failed sample, knowledge answered A with a correct explanation, every detected sample proposed and the first
    one verified)."""
    from aura.families.pasbench import stats as pstats

    out.mkdir(parents=True, exist_ok=True)
    items = pd.DataFrame(pas_items(case), columns=["item_id", "modality", "safety_knowledge", "words", "n_images", "severity"])
    j = pd.DataFrame(pas_judgments(case), columns=["item_id", "model", "sample", "modality", "status", "detected"])
    ok = j[j["status"] == "ok"]
    knowledge = pd.DataFrame([{"item_id": i, "model": m, "status": "ok", "answer": "A", "outcome": "a_correct"}
                              for i, m in j[["item_id", "model"]].drop_duplicates().itertuples(index=False)],
                             columns=["item_id", "model", "status", "answer", "outcome"])
    reactive = pd.DataFrame([{"item_id": r.item_id, "model": r.model, "sample": r.sample, "status": "ok",
                              "detected": r.sample % 2 == 0} for r in ok[ok["detected"] == False].itertuples()],  # noqa: E712
                            columns=["item_id", "model", "sample", "status", "detected"])
    verified = pd.DataFrame([{"item_id": r.item_id, "model": r.model, "sample": r.sample, "proposed": bool(r.detected),
                              "verified": r.sample == 0, "status": "ok"} for r in ok.itertuples()],
                            columns=["item_id", "model", "sample", "proposed", "verified", "status"])
    paths = {}
    for name, table in pstats.compute(items, j, knowledge, reactive, verified, RESAMPLES, 42).items():
        paths[f"pasbench_stats_{name}"] = out / f"{name}.csv"
        table.to_csv(paths[f"pasbench_stats_{name}"], index=False)
    return paths


def pas_write_construction(case: str, out: Path) -> dict[str, Path]:
    """The construction stages' JSONL files: none in `empty`, else one kept log, one rejected by the automatic
    check and one image item whose prompt drafting failed."""
    import json as _json

    rows = {"pasbench_construct_text_drafts": [{"item_id": "text-9001", "status": "ok"},
                                               {"item_id": "text-9002", "status": "rejected"}],
            "pasbench_construct_text_reviews": [{"item_id": "text-9001", "decision": "accept", "decided_by": "reviewer"},
                                                {"item_id": "text-9002", "decision": "reject", "decided_by": "automatic_check"}],
            "pasbench_constructed_text": [{"item_id": "text-9001"}],
            "pasbench_construct_text_exclusions": [{"item_id": "text-9002", "modality": "text", "step": "automatic_check",
                                                    "reason": "rejected: names the risk"}],
            "pasbench_construct_image_drafts": [{"item_id": "image-9001", "status": "unparsed"}],
            "pasbench_constructed_images": [],
            "pasbench_construct_image_exclusions": [{"item_id": "image-9001", "modality": "image", "step": "prompts",
                                                     "reason": "unparsed: schema violation"}]}
    out.mkdir(parents=True, exist_ok=True)
    paths = {}
    for key, part in rows.items():
        paths[key] = out / f"{key}.jsonl"
        paths[key].write_text("".join(_json.dumps(r) + "\n" for r in ([] if case == "empty" else part)))
    return paths


@pytest.mark.parametrize("case", PAS_CASES)
def test_every_pasbench_notebook_renders(tmp_path, case):
    from aura.families.pasbench import REPORTS as PAS_REPORTS

    paths = {**pas_write_stats(case, tmp_path / "stats"), **pas_write_construction(case, tmp_path / "construct")}
    for name, spec in PAS_REPORTS.items():
        if name == "pasbench_construction" and case not in ("mixed", "empty"):
            continue  # does not read the judgments
        out = tmp_path / name
        nb = execute(name, params_for(spec, name, paths, out), out)
        for f in outputs_of(spec, name, out):
            assert f.exists() and f.stat().st_size > 0, f"{case}: {name} did not write {f.name}"
        if case == "empty":  # says why it is empty
            assert "no rows" in output_text(nb), name
    rates = pd.read_csv(tmp_path / "pasbench_fig3_image_rates" / "tables" / "pasbench_fig3_image_rates.csv")
    if case == "all_not_applicable":  # the vision-less model is listed with its 8 n/a samples and no rate
        assert rates[["Model", "Accuracy (Average-of-N)", "n/a"]].astype(str).values.tolist() == [["mT", "–", "8"]]
    if case == "mixed":  # mV image items, n = N = 4 (an unparsed run counts as not warned, the paper's denominator):
        # c/n = 1/4 (image-0000: sample 0; sample 3 unparsed) and 2/4 (image-0001: samples 0-1; sample 3 unparsed)
        # -> Average-of-N = (1/4 + 2/4) / 2 = 37.5 % (not 50.0 %: the unparsed run is not left out of n)
        assert rates.set_index("Model").loc["mV", "Accuracy (Average-of-N)"].startswith("37.5 [")
    if case == "empty":
        assert rates.empty and "Accuracy (Average-of-N)" in rates.columns
    if case == "mixed":  # construction: 2 logs drafted, 1 kept (reviewer accept), 1 image draft unparsed
        funnel = pd.read_csv(tmp_path / "pasbench_construction" / "tables" / "pasbench_construction_funnel.csv")
        counts = {(r.Set, r.Step): r.Count for r in funnel.itertuples()}
        assert (counts[("text", "knowledge points drafted")], counts[("text", "items kept")],
                counts[("text", "accept (reviewer)")], counts[("image", "drafts unparsed")]) == (2, 1, 1, 1)


def params_for(spec: dict, name: str, paths: dict[str, Path], out: Path) -> dict[str, str]:
    p = {key: str(paths[key]) for key in spec["inputs"]}
    if spec.get("figure", True):
        p.update(out_pdf=str(out / "figures" / f"{name}.pdf"), out_png=str(out / "figures" / f"{name}.png"))
    p["tables_dir"] = str(out / "tables")
    return p


def outputs_of(spec: dict, name: str, out: Path) -> list[Path]:
    files = [out / "figures" / f"{name}.pdf", out / "figures" / f"{name}.png"] if spec.get("figure", True) else []
    return files + [out / "tables" / f"{t}.{ext}" for t in spec.get("tables", []) for ext in ("csv", "md")]


# ---- LPS-Bench (notebooks/lpsbench/): Tables 3, 4 and Fig. 6 over the family's Safe Rate code ----------------
# Cases: the hand-counted fixture of tests/lpsbench/test_lpsbench_stats.py (two models, raw and mitigated, every
# execution_failed reason, two excluded cases); one model run raw only (no mitigated side); every evaluation
# unparsed (every case execution_failed); no evaluation row.
LPS_CASES = ["mixed", "raw_only", "all_unparsed", "empty"]


def lps_write_stats(case: str, out: Path) -> dict[str, Path]:
    import json as _json

    from aura.families.lpsbench import safe_rate
    from test_lpsbench_stats import EXCLUDED, RUNS, case_rows, eval_rows

    runs = {"mixed": list(RUNS), "raw_only": [("mA", "raw")], "all_unparsed": [("mA", "raw"), ("mA", "mitigated")],
            "empty": []}[case]
    rows = [r for key in runs for r in eval_rows(*key)]
    if case == "all_unparsed":
        rows = [{**r, "status": "unparsed", "label": None, "outcome": "execution_failed", "reason": "unparsed"}
                for r in rows]
    out.mkdir(parents=True, exist_ok=True)
    excluded = EXCLUDED if case == "mixed" else []
    paths = {"lpsbench_excluded": out / "excluded.jsonl"}
    paths["lpsbench_excluded"].write_text("".join(_json.dumps(r) + "\n" for r in excluded))
    ev = pd.DataFrame(rows, columns=["case_id", "model", "variant", "status", "label", "outcome", "reason"])
    # broken="excluded": the fixture's derivations leave the broken cases out of n (test_lpsbench_stats.py)
    tables = safe_rate.compute(pd.DataFrame(case_rows()), ev, pd.DataFrame(excluded), broken="excluded")
    for name, table in tables.items():
        paths[f"lpsbench_stats_{name}"] = out / f"{name}.csv"
        table.to_csv(paths[f"lpsbench_stats_{name}"], index=False)
    return paths


@pytest.mark.parametrize("case", LPS_CASES)
def test_every_lpsbench_notebook_renders(tmp_path, case):
    from aura.families.lpsbench import REPORTS as LPS_REPORTS

    paths = lps_write_stats(case, tmp_path / "stats")
    for name, spec in LPS_REPORTS.items():
        out = tmp_path / name
        nb = execute(name, params_for(spec, name, paths, out), out)
        for f in outputs_of(spec, name, out):
            assert f.exists() and f.stat().st_size > 0, f"{case}: {name} did not write {f.name}"
        if case == "empty":
            assert "no rows" in output_text(nb), name
    t3 = pd.read_csv(tmp_path / "lpsbench_table3_risk" / "tables" / "lpsbench_table3_risk.csv").astype(str)
    f6 = pd.read_csv(tmp_path / "lpsbench_fig6_mitigation" / "tables" / "lpsbench_fig6_mitigation.csv").astype(str)
    if case == "mixed":  # mA raw TS: 2 safe of 5 cases (Wilson 11.8-76.9); FA 1 safe of 2 (one missing); mean 0.45
        row = t3[(t3["Model"] == "mA") & (t3["Variant"] == "Raw")].iloc[0]
        assert (row["TS"], row["FA"], row["RC"], row["Benign Avg."]) == \
            ("40.0 [11.8, 76.9] (2/5)", "50.0 [9.5, 90.5] (1/2)", "–", "45.0")
        assert row["Execution failed"] == "6 (evaluator 1, unparsed 1, step_cap 1, episode_error 1, missing 2)"
        md = (tmp_path / "lpsbench_table3_risk" / "tables" / "lpsbench_table3_risk.md").read_text()
        assert "Broken upstream tool module: 2 case(s) (TS 1, RC 1)" in md
        # mA benign: raw 0.45 -> mitigated 0.65 = +20.0 points; 2 of 7 paired cases not safe -> safe
        benign = f6[(f6["Model"] == "mA") & (f6["Risks"] == "Benign")].iloc[0]
        assert (benign["Raw %"], benign["Mitigated %"], benign["Difference (pp)"], benign["Not safe -> safe"]) == \
            ("45.0", "65.0", "+20.0", "2")
    if case == "all_unparsed":  # every case execution_failed: every rate a measured 0
        row = t3.iloc[0]
        assert row["TS"] == "0.0 [0.0, 43.4] (0/5)" and row["Benign Avg."] == "0.0"
        assert row["Execution failed"] == "12 (unparsed 10, missing 2)"
    if case == "empty":
        assert t3.empty and "Benign Avg." in t3.columns
