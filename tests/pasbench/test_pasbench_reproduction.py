"""PaSBench's reproduction stage: hand-derived verdicts (bootstrap intervals, a bound, a model marked unavailable,
Table 1's facts, the set-specific model counts, the single-pass row's set from its note), every row "demo data" on
the default config, and both families' reproduction notebooks render their tables and figure."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from aura.families import family_of_report
from aura.families.pasbench.reproduction import REFERENCE, lookup_for
from aura.stats.reference import COLUMNS
from aura.stats.reproduction import verdict_table
from notebook_fixture import execute_report

REPO = Path(__file__).resolve().parents[2]
ROW = dict.fromkeys(COLUMNS, "")


def ref_folder(tmp: Path) -> Path:
    rows = [dict(ROW, table="§1 text", row="G", column="Accuracy, image set", value="71", unit="percent", where="§1",
                 measures="avg_of_n", model="g"),
            dict(ROW, table="§1 text", row="G", column="Accuracy, text set", value="64", unit="percent", where="§1",
                 measures="avg_of_n", model="g"),
            dict(ROW, table="§4.1 text", row="G", column="Robustness, image set", value="0.05", unit="fraction",
                 where="§4.1", measures="worst_of_n", model="g", note="upper bound: printed as < 0.05"),
            dict(ROW, table="§4.1 text", row="O", column="Accuracy, image set", value="13", unit="percent",
                 where="§4.1", measures="avg_of_n", model="old"),
            dict(ROW, table="Table 1", row="Size", column="Text", value="3", unit="count", where="Table 1",
                 measures="items"),
            dict(ROW, table="Table 1", row="Avg Length", column="Text", value="547", unit="count", where="Table 1",
                 measures="length_mean")]
    rows += [dict(ROW, table="§4.1 text", row=f"{s} set", column="models evaluated", value=str(k), unit="count",
                  where="§4.1", measures="models") for s, k in (("text", 2), ("image", 1))]
    rows += [dict(ROW, table="§4.2.2 text", row="G", column="Accuracy, single pass", value="30", unit="percent",
                  where="§4.2.2", measures="avg_of_n", model="g", note="printed as around 30%; image set")]
    tmp.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows, columns=COLUMNS).to_csv(tmp / "claims.csv", index=False)
    shutil.copy(REFERENCE / "margins.yaml", tmp)  # the family's own margins
    return tmp


def verdicts(tmp_path) -> pd.DataFrame:
    rates = pd.DataFrame({"model": ["g", "g", "t"], "modality": ["image", "text", "text"], "n_items": [128, 288, 288],
                          "avg_of_n": [0.70, 0.50, 0.2], "avg_of_n_lo": [0.65, 0.46, 0.15],
                          "avg_of_n_hi": [0.75, 0.54, 0.25], "worst_of_n": [0.10, 0.02, 0.0],
                          "worst_of_n_lo": [0.04, 0.0, 0.0], "worst_of_n_hi": [0.16, 0.05, 0.01]})
    items = pd.DataFrame({"item_id": ["t1", "t2", "t3"], "modality": "text", "words": [500, 547, 595],
                          "safety_knowledge": ["k1", "k2", "k3"], "n_images": 0})
    tables = {"rates": rates, **{k: pd.DataFrame() for k in ("k_curves", "knowledge", "reactive", "pearson_models",
                                                              "pearson_samples")}}
    models = {"g": {"endpoint": "x"}, "t": {"endpoint": "x"}}
    return verdict_table(ref_folder(tmp_path / "ref"), lookup_for(tables, items, models))


def test_hand_derived_verdicts(tmp_path):
    v = verdicts(tmp_path)
    got = {(r.row, r.column): (r.verdict, r.reason) for r in v.itertuples()}
    # 0.70 [0.65, 0.75] against 71: se = 0.10 / 3.92 = 2.55 points, the paper's the same (same design, n
    # assumed): se_d = 3.6, 90% interval -1 +- 5.9 inside +-10 -> reproduced
    assert got["G", "Accuracy, image set"] == ("reproduced", "")
    # 0.50 [0.46, 0.54] against 64: 14 points below, se_d = 2.9, z = 4.8 -> not reproduced
    assert got["G", "Accuracy, text set"] == ("not reproduced", "")
    # a bound < 0.05 against 0.10 [0.04, 0.16]: one-sided z = 0.05 / 0.0306 = 1.63, p = 0.051 -> inconclusive
    bound = v[v["column"] == "Robustness, image set"].iloc[0]
    assert (bound["kind"], bound["verdict"]) == ("bound", "inconclusive") and 0.05 < bound["p_value"] < 0.052
    # the model marked unavailable under models: (here: not under models at all -> not produced)
    assert got["O", "Accuracy, image set"] == ("not comparable", "not produced")
    assert got["Size", "Text"] == ("reproduced", "") and got["Avg Length", "Text"] == ("reproduced", "")  # 547.3
    # the models evaluated per set: text has g and t, image g alone (the set from the row label)
    assert got["text set", "models evaluated"] == ("reproduced", "") and got["image set", "models evaluated"] == (
        "reproduced", "")
    # the single-pass row finds its set in its note: the image set's 0.70 against 30
    single = v[v["column"] == "Accuracy, single pass"].iloc[0]
    assert single["reproduced"] == pytest.approx(70.0) and single["verdict"] == "not reproduced"


def test_an_unavailable_model_and_an_incomplete_roster(tmp_path):
    tables = {k: pd.DataFrame() for k in ("rates", "k_curves", "knowledge", "reactive", "pearson_models",
                                          "pearson_samples")}
    models = {"old": {"endpoint": "x", "unavailable": "retired 2025"}}
    v = verdict_table(ref_folder(tmp_path / "ref"), lookup_for(tables, pd.DataFrame(), models,
                                                              {"models": ["old"], "paper_total": 36}))
    got = {(r.row, r.column): (r.verdict, r.reason) for r in v.itertuples()}
    assert got["O", "Accuracy, image set"] == ("not comparable", "model unavailable: retired 2025")
    assert got["text set", "models evaluated"] == (
        "not comparable", "different models: 1 of the roster unavailable, 35 not named in our copy of the paper")
    capped = verdict_table(ref_folder(tmp_path / "ref2"), lookup_for(tables, pd.DataFrame(), {}, caps={"text": 100}))
    assert set(capped.loc[capped["table"] == "Table 1", "reason"]) == {"subsample: the run caps the items (text 100)"}


def test_default_config_is_demo_data_throughout(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "aura", "pasbench-reproduce", "--configfile", "config/config.yaml",
                           "--in", f"items={REPO / 'data/raw/pasbench_demo/nonexistent.jsonl'}",
                           "--out", f"verdicts={tmp_path / 'v.csv'}", "--out", f"findings={tmp_path / 'f.csv'}"],
                          capture_output=True, text=True, cwd=REPO)
    assert proc.returncode != 0 and "nonexistent.jsonl" in proc.stderr  # a missing input: one line, no output
    assert not (tmp_path / "v.csv").exists()
    items = tmp_path / "items.jsonl"
    items.write_text('{"item_id": "t1", "modality": "text", "words": 10}\n')
    proc = subprocess.run([sys.executable, "-m", "aura", "pasbench-reproduce", "--configfile", "config/config.yaml",
                           "--in", f"items={items}", "--out", f"verdicts={tmp_path / 'v.csv'}",
                           "--out", f"findings={tmp_path / 'f.csv'}"], capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-2000:]
    v = pd.read_csv(tmp_path / "v.csv")
    assert len(v) == 58 and set(v["verdict"]) == {"not comparable"} and v["reason"].str.startswith("demo data").all()
    assert ("pasbench: not comparable, no verdict: all 58 reported numbers (demo data: pasbench_demo; embedded model "
            "smollm2)") in proc.stderr



def test_reproduction_notebooks_render(tmp_path):
    """Both families' notebooks on a small verdict table (every outcome, a count, a bound, an r-less family) and
    on an empty one; each writes its two tables and the figure."""
    verdicts_ = verdicts(tmp_path)
    findings = pd.DataFrame([{"table": "T", "row": "b", "column": "x", "check": "percentage", "detail": "no k/52"}])
    for name in ("reproduction", "pasbench_reproduction"):
        for case, (v, f) in {"some": (verdicts_, findings), "empty": (verdicts_.iloc[:0], findings.iloc[:0])}.items():
            out = tmp_path / name / case
            out.mkdir(parents=True)
            v.to_csv(out / "v.csv", index=False)
            f.to_csv(out / "f.csv", index=False)
            inputs = family_of_report(name).reports[name]["inputs"]
            execute_report(name, {inputs[0]: str(out / "v.csv"), inputs[1]: str(out / "f.csv"), "tables_dir": str(out / "tables"),
                          "out_pdf": str(out / f"{name}.pdf"), "out_png": str(out / f"{name}.png")})
            for t in family_of_report(name).reports[name]["tables"]:
                assert (out / "tables" / f"{t}.md").is_file()
            assert (out / f"{name}.png").stat().st_size > 0
            md = (out / "tables" / f"{name}.md").read_text()
            assert (f"of {len(verdicts_)} reported numbers, " in md) if case == "some" else ("of 0 reported numbers" in md)
