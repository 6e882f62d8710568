"""AURA's reproduction stage: hand-derived verdicts on a small fixture, every row "demo data" on the default
config, the report notebook renders (tables, findings, figure), the end-of-run line."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from aura.config import load_config
from aura.families.aura.stats.flips import ALL_MODELS
from aura.families.aura.stats.reproduction import REFERENCE, lookup_for
from aura.stats.reference import COLUMNS
from aura.stats.reproduction import verdict_table

REPO = Path(__file__).resolve().parents[2]
ROW = dict.fromkeys(COLUMNS, "")


def ref_folder(tmp: Path) -> Path:
    """headline.csv and flip_rates.csv as the family's files name them, five rows."""
    rows = {"headline.csv": [dict(ROW, table="§7.1 text", row="A", column="unsafe", value="16.9", unit="percent",
                                  where="§7.1", measures="unsafe_all", model="a"),
                             dict(ROW, table="§7.1 text", row="B", column="unsafe", value="50.0", unit="percent",
                                  where="§7.1", measures="unsafe_all", model="b"),
                             dict(ROW, table="§7.1 text", row="C", column="unsafe", value="30", unit="percent",
                                  where="§7.1", measures="unsafe_all", model="c")],
            "flip_rates.csv": [dict(ROW, table="§7.3 text", row="RS5 Oversight", column="flips", value="52.3",
                                    unit="percent", n="86", where="§7.3", measures="flip_rate"),
                               dict(ROW, table="§7.3 text", row="RS2 Scale", column="flips", value="17.9",
                                    unit="percent", n="78", where="§7.3", measures="flip_rate"),
                               dict(ROW, table="§7.3 text", row="RS5 Oversight", column="flipped", value="45",
                                    unit="count", n="86", where="§7.3", measures="flipped")]}
    tmp.mkdir(parents=True, exist_ok=True)
    for name, part in rows.items():
        pd.DataFrame(part, columns=COLUMNS).to_csv(tmp / name, index=False)
    shutil.copy(REFERENCE / "margins.yaml", tmp)  # the family's margins: 10 points on a rate
    return tmp


def stats() -> dict[str, pd.DataFrame]:
    t33 = pd.DataFrame({"model": ["a", "b"], "group": ["frontier", "frontier"], "unsafe_all_k": [17, 17],
                        "unsafe_all_n": [100, 100], "unsafe_all_rate": [0.17, 0.17]})
    t35 = pd.DataFrame({"model": [ALL_MODELS, ALL_MODELS], "dimension": ["RS5", "RS2"], "flipped": [45, 14], "n": [86, 77]})
    return {"table33_overall": t33, "table35_flips": t35, **{k: pd.DataFrame() for k in (
        "table36_failure_mechanism", "table31_bootstrap", "table32_matched_pairs", "composition")}}


def test_hand_derived_verdicts(tmp_path):
    v = verdict_table(ref_folder(tmp_path / "ref"), lookup_for(stats())).set_index(["row", "column"])
    # a: 17/100 against 16.9% (the paper states no n: the run's 100 assumed, so 17/100 against 17/100): the
    # difference's 90% Newcombe interval is about +-8.7 points, inside the 10-point margin -> reproduced
    a = v.loc["A", "unsafe"]
    assert (a["verdict"], a["reported_n"]) == ("reproduced", 100) and a["n_basis"].startswith("assumed")
    assert abs(a["diff_lo"]) < 15 and a["diff_hi"] < 15
    # b: 17/100 against 50.0% of 100: 33 points below -> not reproduced (Holm over the family's tested rows)
    assert v.loc["B", "unsafe"]["verdict"] == "not reproduced" and v.loc["B", "unsafe"]["p_adjusted"] < 1e-4
    assert (v.loc["C", "unsafe"]["verdict"], v.loc["C", "unsafe"]["reason"]) == ("not comparable", "not produced")
    # RS5: 45/86 against 52.3% of 86 (45/86): no difference, but 86 a side leave +-12 points -> inconclusive; the
    # count 45 of 86 is compared as the same rate
    for column in ("flips", "flipped"):
        rs5 = v.loc["RS5 Oversight", column]
        assert rs5["verdict"] == "inconclusive" and rs5["reproduced"] == pytest.approx(100 * 45 / 86)
    assert v.loc["RS5 Oversight", "flipped"]["unit"] == "percent"
    # RS2: 14 of the run's 77 against 14 of the paper's 78: judged at its own n
    rs2 = v.loc["RS2 Scale", "flips"]
    assert (rs2["verdict"], rs2["n"], rs2["reported_n"]) == ("inconclusive", 77, 78)


def run_stage(tmp: Path, config: Path, **inputs) -> subprocess.CompletedProcess:
    args = [f"--in={k}={p}" for k, p in inputs.items()]
    return subprocess.run([sys.executable, "-m", "aura", "reproduce", "--configfile", str(config),
                           *[x for a in args for x in a.split("=", 1)],
                           "--out", f"verdicts={tmp / 'verdicts.csv'}", "--out", f"findings={tmp / 'findings.csv'}"],
                          capture_output=True, text=True, cwd=REPO)


def test_default_config_is_demo_data_throughout(tmp_path):
    proc = run_stage(tmp_path, REPO / "config" / "config.yaml")  # no stats input: the lookup is never called
    assert proc.returncode == 0, proc.stderr[-2000:]
    v = pd.read_csv(tmp_path / "verdicts.csv", keep_default_na=False)
    assert len(v) == 171 and set(v["verdict"]) == {"not comparable"}
    assert v["reason"].str.startswith("demo data").all() and (v["reproduced"] == "").all()
    assert "aura: not comparable, no verdict: all 171 reported numbers (demo data: " in proc.stderr
    findings = pd.read_csv(tmp_path / "findings.csv")
    assert list(findings.columns) == ["table", "row", "column", "check", "detail"] and len(findings) > 0


def test_a_real_run_gets_verdicts_and_the_end_of_run_line(tmp_path):
    raw = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    raw["endpoints"]["api"] = {"kind": "openai", "base_url": "http://127.0.0.1:9/v1", "api_key_env": None}
    for m in raw["models"].values():
        m["endpoint"] = "api"
    raw["paths"].update(seeds=str(tmp_path / "seeds"), results=str(tmp_path / "results"), logs=str(tmp_path / "logs"))
    cfg = tmp_path / "real.yaml"
    cfg.write_text(yaml.safe_dump(raw))
    config = load_config(str(cfg))
    t33 = tmp_path / "t33.csv"
    pd.DataFrame({"model": ["claude-sonnet-4.6"], "group": ["frontier"], "unsafe_all_k": [169], "unsafe_all_n": [1000],
                  "unsafe_all_rate": [0.169]}).to_csv(t33, index=False)
    out = Path(config.paths["results"]) / "stats"
    out.mkdir(parents=True)
    proc = run_stage(out, cfg, table33_overall=t33)
    assert proc.returncode == 0, proc.stderr[-2000:]
    (out / "verdicts.csv").rename(out / "reproduction.csv")
    v = pd.read_csv(out / "reproduction.csv")
    row = v[(v["model"] == "claude-sonnet-4.6") & (v["measures"] == "unsafe_all")].iloc[0]
    assert row["verdict"] == "reproduced" and row["n"] == 1000  # 169/1000 against 16.9% of (assumed) 1000
    assert not v["reason"].fillna("").str.startswith("demo data").any()
    summary = subprocess.run([sys.executable, "-m", "aura", "summary", "--configfile", str(cfg)],
                             capture_output=True, text=True, cwd=REPO)
    reproduced = int((v["verdict"] == "reproduced").sum())
    assert (f"aura summary: reproduction: aura: of 171 reported numbers, {reproduced} reproduced"
            in summary.stderr), summary.stderr
    assert REFERENCE.is_dir()


def test_the_viewer_shows_every_family_verdict_table(tmp_path):
    from aura.pipeline.layout import layout
    from aura.web.viewer.data import RunData
    from aura.web.viewer.pages import Links, Pages

    raw = load_config(str(REPO / "config" / "config.yaml")).raw
    raw["paths"] = {**raw["paths"], "results": str(tmp_path / "results"), "interim": str(tmp_path / "interim")}
    path = Path(layout(raw)["reproduction"])
    path.parent.mkdir(parents=True)
    pd.DataFrame([{"table": "§7.1 text", "row": "A", "column": "unsafe", "reported": 16.9, "reproduced": 0.16899,
                   "lo": 10.9, "hi": 25.8, "n": 100, "difference": 0.1, "diff_lo": -8.5, "diff_hi": 8.7, "margin": 10,
                   "verdict": "reproduced", "reason": ""},
                  {"table": "§7.1 text", "row": "B", "column": "unsafe", "reported": 50.0, "reproduced": None,
                   "lo": None, "hi": None, "n": None, "verdict": "not comparable", "reason": "demo data: demo_seeds"}]
                 ).to_csv(path, index=False)
    data = RunData.load(raw)
    assert list(data.reproductions) == ["aura"]
    html = Pages(data, Links(data.filters)).tables()
    assert "Of 2 reported numbers: 1 reproduced, 0 not reproduced, 0 inconclusive, 1 not comparable." in html
    assert "0.1 [-8.5, 8.7]" in html and "±10" in html and "[10.9, 25.8]" in html and "0.169" in html and "demo data: demo_seeds" in html
