"""PaSBench's reproduction stage (issue 34): hand-derived verdicts (bootstrap interval, a bound, a model marked
unavailable, Table 1 counts), every row "demo data" on the default config, and both families' reproduction
notebooks render their tables and forest figure."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
from papermill.iorw import load_notebook_node

from aura.families import family_of_report
from aura.families.pasbench.reproduction import lookup_for
from aura.stats.reproduce import COLUMNS
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
    tmp.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows, columns=COLUMNS).to_csv(tmp / "claims.csv", index=False)
    return tmp


def test_hand_derived_verdicts(tmp_path):
    rates = pd.DataFrame({"model": ["g", "g"], "modality": ["image", "text"], "n_items": [128, 288],
                          "avg_of_n": [0.70, 0.50], "avg_of_n_lo": [0.65, 0.46], "avg_of_n_hi": [0.75, 0.54],
                          "worst_of_n": [0.10, 0.02], "worst_of_n_lo": [0.04, 0.0], "worst_of_n_hi": [0.16, 0.05]})
    items = pd.DataFrame({"item_id": ["t1", "t2", "t3"], "modality": "text", "words": [500, 547, 595],
                          "safety_knowledge": ["k1", "k2", "k3"], "n_images": 0})
    tables = {"rates": rates, **{k: pd.DataFrame() for k in ("k_curves", "knowledge", "reactive", "pearson_models",
                                                              "pearson_samples")}}
    models = {"g": {"endpoint": "x"}, "old": {"endpoint": "x", "unavailable": "retired 2025"}}
    v = verdict_table(ref_folder(tmp_path / "ref"), lookup_for(tables, items, models))
    got = {(r.row, r.column): (r.verdict, r.reason) for r in v.itertuples()}
    assert got["G", "Accuracy, image set"] == ("within", "")     # 71 in the bootstrap interval [65, 75]
    assert got["G", "Accuracy, text set"] == ("outside", "")     # 64 above [46, 54]
    assert got["G", "Robustness, image set"] == ("within", "")   # bound < 0.05: the interval [0.04, 0.16] reaches below
    assert got["O", "Accuracy, image set"] == ("not comparable", "model unavailable: retired 2025")
    assert got["Size", "Text"] == ("within", "") and got["Avg Length", "Text"] == ("within", "")  # 3 items, mean 547
    assert list(v["bound"]) == ["", "", "upper", "", "", ""]


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
    assert "pasbench: 0 of 58 reported numbers within the reproduced 95% interval (58 not comparable)" in proc.stderr



def test_reproduction_notebooks_render(tmp_path):
    """Both families' notebooks on a small verdict table (within / outside / not comparable, a count and an r
    panel) and on an empty one; each writes its two tables and the figure."""
    verdicts = pd.DataFrame([
        {"table": "T", "row": "a", "column": "x", "unit": "percent", "reported": 16.9, "reproduced": 17.0, "lo": 10.9,
         "hi": 25.8, "n": 100, "verdict": "within", "reason": ""},
        {"table": "T", "row": "b", "column": "x", "unit": "percent", "reported": 50.0, "reproduced": 17.0, "lo": 10.9,
         "hi": 25.8, "n": 100, "verdict": "outside", "reason": ""},
        {"table": "T", "row": "c", "column": "x", "unit": "percent", "reported": 30.0, "verdict": "not comparable",
         "reason": "demo data: embedded model smollm2"},
        {"table": "F8", "row": "models", "column": "r", "unit": "r", "reported": 0.897, "reproduced": 0.8, "lo": 0.5,
         "hi": 0.93, "n": 20, "verdict": "within", "reason": ""}])
    findings = pd.DataFrame([{"table": "T", "row": "b", "column": "x", "check": "percentage", "detail": "no k/52"}])
    for name in ("reproduction", "pasbench_reproduction"):
        for case, (v, f) in {"some": (verdicts, findings), "empty": (verdicts.iloc[:0], findings.iloc[:0])}.items():
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
            assert ("2 of 4 reported numbers within" in md) if case == "some" else ("0 of 0" in md)
