"""LPS-Bench's reproduction stage: verdicts on Tables 3 and 4 derived by hand (reproduced, not reproduced,
inconclusive, a different n judged at its own n, excluded cases, the Avg. columns with their interval, a model not
produced, the raw variant only), every row "demo data" on the default config, the stage end to end on the paper
config, and the notebook renders."""
from __future__ import annotations

import math
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from papermill.iorw import load_notebook_node

from aura.families import family_of_report
from aura.families.lpsbench import safe_rate as SR
from aura.families.lpsbench.reproduction import REFERENCE, lookup_for
from aura.stats.reference import COLUMNS
from aura.stats.reproduction import verdict_table
from notebook_fixture import execute_report

REPO = Path(__file__).resolve().parents[2]
ROW = dict.fromkeys(COLUMNS, "")


def ref_row(table: str, row: str, column: str, value: str, n, model: str, measures: str = "safe_rate") -> dict:
    return dict(ROW, table=table, row=row, column=column, value=value, unit="percent", n=n, where=table,
                measures=measures, model=model)


def ref_folder(tmp: Path) -> Path:
    rows = [ref_row("Table 3", "G", "TS", "27.27", 55, "g"),        # 15/55 = 27.27%
            ref_row("Table 3", "G", "OC", "50.00", 62, "g"),        # 10/62
            ref_row("Table 3", "G", "HS", "25.00", 68, "g"),        # 16 of the run's 65 (3 excluded)
            ref_row("Table 3", "G", "RC", "36.54", 52, "g"),        # every case excluded
            ref_row("Table 3", "G", "Avg. (benign)", "38.64", "", "g", "mean_safe_rate"),
            ref_row("Table 3", "Q", "TS", "16.36", 55, "q"),        # q not evaluated
            ref_row("Table 3", "M", "TS", "16.36", 55, "m"),        # m: a mitigated run only
            ref_row("Table 4", "G", "Web", "100.00", 10, "g"),      # 10/10: on the Wilson upper edge (1)
            ref_row("Table 4", "G", "Code", "20.00", 90, "g"),      # 18/90
            ref_row("Table 4", "G", "Overall Avg.", "60.00", "", "g", "mean_safe_rate")]
    tmp.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows, columns=COLUMNS).to_csv(tmp / "cells.csv", index=False)
    shutil.copy(REFERENCE / "margins.yaml", tmp)  # the family's own margins: 10 points on a rate and a mean
    return tmp


def cell(model, variant, row, key, safe, n, excluded=0, **extra) -> dict:
    return {"model": model, "variant": variant, "row": row, **key, "safe": safe, "n": n, "excluded": excluded,
            "safe_rate": safe / n if n else float("nan"), **extra}


def stats_tables() -> dict[str, pd.DataFrame]:
    risk = [cell("g", "raw", "risk", {"risk": "TS"}, 15, 55), cell("g", "raw", "risk", {"risk": "OC"}, 10, 62),
            cell("g", "raw", "risk", {"risk": "HS"}, 16, 65, 3), cell("g", "raw", "risk", {"risk": "RC"}, 0, 0, 52),
            cell("g", "raw", "average", {"risk": "benign_avg"}, 25, 117),
            cell("g", "mitigated", "risk", {"risk": "TS"}, 55, 55), cell("m", "mitigated", "risk", {"risk": "TS"}, 9, 55)]
    risk[4]["safe_rate"] = (15 / 55 + 10 / 62) / 2  # a mean of the two rates
    domain = [cell("g", "raw", "domain", {"domain_label": "Web"}, 10, 10),
              cell("g", "raw", "domain", {"domain_label": "Code"}, 18, 90),
              cell("g", "raw", "average", {"domain_label": "Avg."}, 28, 100, safe_rate=0.6)]
    return {"safe_rate_by_risk": pd.DataFrame(risk), "safe_rate_by_domain": pd.DataFrame(domain)}


def test_hand_derived_verdicts(tmp_path):
    v = verdict_table(ref_folder(tmp_path / "ref"), lookup_for(stats_tables())).set_index(["table", "row", "column"])
    got = {k: (r.verdict, r.reason) for k, r in v.iterrows()}
    # 15/55 against 15 of 55: difference 0, but at n = 55 a side the difference's 90% interval is about +-14 points
    ts = v.loc["Table 3", "G", "TS"]
    assert ts["verdict"] == "inconclusive" and ts["difference"] == 0 and ts["diff_hi"] > 10
    assert (ts["reproduced"], ts["n"], ts["reported_n"]) == (pytest.approx(15 / 55 * 100), 55, 55)
    # 10/62 (16.1%) against 31 of 62 (50.00%): 34 points below, excluded by every interval and by Holm
    assert got["Table 3", "G", "OC"] == ("not reproduced", "") and v.loc["Table 3", "G", "OC"]["p_adjusted"] < 0.001
    # 16 of the run's 65 (3 cases excluded) against 17 of the paper's 68: judged at its own n
    hs = v.loc["Table 3", "G", "HS"]
    assert hs["verdict"] == "inconclusive" and (hs["n"], hs["reported_n"]) == (65, 68)
    assert got["Table 3", "G", "RC"] == ("not comparable",
                                         "excluded cases: all 52 cases of the cell excluded (broken upstream module)")
    assert got["Table 3", "Q", "TS"] == ("not comparable", "not produced: q not evaluated in this run")
    assert got["Table 3", "M", "TS"][1].startswith("not produced: no raw run of m")
    # 10/10 against 10 of 10: the same edge on both sides, p = 1, but 10 cases a side decide nothing
    assert got["Table 4", "G", "Web"][0] == "inconclusive" and v.loc["Table 4", "G", "Web"]["p_value"] == 1
    # the benign average: the mean of TS and OC (the risks it has), se = sqrt(sum p(1-p)/n) / 2
    avg = v.loc["Table 3", "G", "Avg. (benign)"]
    p1, p2 = 15 / 55, 10 / 62
    se = math.sqrt(p1 * (1 - p1) / 55 + p2 * (1 - p2) / 62) / 2
    assert avg["reproduced"] == pytest.approx((p1 + p2) * 50) and avg["n"] == 117 and avg["kind"] == "mean"
    assert (avg["lo"], avg["hi"]) == pytest.approx((100 * ((p1 + p2) / 2 - 1.959964 * se),
                                                    100 * ((p1 + p2) / 2 + 1.959964 * se)), abs=1e-4)
    # the paper's 38.64 with the same design's error: 16.9 points below, se_d = sqrt(2) se = 5.4 points, z = 3.1
    assert avg["difference"] == pytest.approx((p1 + p2) * 50 - 38.64)
    assert avg["diff_hi"] == pytest.approx(avg["difference"] + 1.959964 * math.sqrt(2) * 100 * se, abs=1e-4)
    assert avg["verdict"] == "not reproduced"
    assert got["Table 4", "G", "Overall Avg."][0] in ("reproduced", "inconclusive")
    assert v["p_adjusted"].notna().sum() == v["p_value"].notna().sum() == 7  # Holm over the 7 cells compared


def aura(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "aura", "lpsbench-reproduce", *args], capture_output=True, text=True,
                          cwd=REPO)


def test_default_config_is_demo_data_throughout(tmp_path):
    proc = aura("--configfile", "config/config.yaml", "--out", f"verdicts={tmp_path / 'v.csv'}",
                "--out", f"findings={tmp_path / 'f.csv'}")
    assert proc.returncode == 0, proc.stderr[-2000:]
    v = pd.read_csv(tmp_path / "v.csv", comment="#")
    assert len(v) == 247 and set(v["verdict"]) == {"not comparable"}
    assert v["reason"].str.startswith("demo data").all()
    assert "lpsbench: not comparable, no verdict: all 247 reported numbers (demo data: " in proc.stderr
    f = pd.read_csv(tmp_path / "f.csv", comment="#")  # the paper checked against itself, demo run or not
    assert ("Table 3", "Llama-3.1-8B-Instruct", "RC", "percentage") in set(
        f[["table", "row", "column", "check"]].itertuples(index=False, name=None))


def test_stage_on_the_paper_config(tmp_path):
    """The paper config (no demo data): the stats stage's own CSVs for GPT-5 raw on 3 TS cases (1 safe) give
    GPT-5's TS cell a verdict at its own n (3 against the paper's 55: inconclusive), the models not run "not
    produced"."""
    cases = pd.DataFrame({"case_id": ["a", "b", "c"], "risk": "TS", "domain": "code"})
    evals = pd.DataFrame({"case_id": ["a", "b", "c"], "model": "gpt-5", "variant": "raw",
                          "outcome": ["safe", "unsafe", "unsafe"], "reason": None})
    ins = []
    for name, table in SR.compute(cases, evals).items():
        table.to_csv(tmp_path / f"{name}.csv", index=False)
        ins += ["--in", f"{name}={tmp_path / f'{name}.csv'}"]
    proc = aura("--configfile", "config/lpsbench.yaml", *ins, "--out", f"verdicts={tmp_path / 'v.csv'}",
                "--out", f"findings={tmp_path / 'f.csv'}")
    assert proc.returncode == 0, proc.stderr[-2000:]
    v = pd.read_csv(tmp_path / "v.csv", comment="#").set_index(["table", "row", "column"])
    ts = v.loc[("Table 3", "GPT-5", "TS")]
    assert (ts["verdict"], ts["n"], ts["reported_n"]) == ("inconclusive", 3, 55)
    assert v.loc[("Table 4", "GPT-5", "Code"), "verdict"] == "inconclusive"
    assert v.loc[("Table 3", "GPT-5", "OC"), "reason"] == "not produced: no OC cell in this run"  # no OC case run
    assert v.loc[("Table 3", "GPT-5.1", "TS"), "reason"] == "not produced: gpt-5.1 not evaluated in this run"
    assert v.loc[("Table 3", "GPT-5", "Avg. (benign)"), "verdict"] == "inconclusive"  # the mean of TS alone
    assert not v["reason"].fillna("").str.startswith("demo data").any()
    assert "lpsbench: of 247 reported numbers, 0 reproduced" in proc.stderr



def test_reproduction_notebook_renders(tmp_path):
    """The notebook on the hand-derived verdicts (within / outside / not comparable) and on an empty table:
    it writes its two tables and the figure."""
    name = "lpsbench_reproduction"
    verdicts = verdict_table(ref_folder(tmp_path / "ref"), lookup_for(stats_tables()))
    findings = pd.DataFrame([{"table": "Table 3", "row": "G", "column": "OC", "check": "percentage",
                              "detail": "no k/62"}])
    nb = load_notebook_node(str(family_of_report(name).notebook(name)))
    assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code")  # stored without outputs
    for case, (v, f) in {"some": (verdicts, findings), "empty": (verdicts.iloc[:0], findings.iloc[:0])}.items():
        out = tmp_path / case
        out.mkdir()
        v.to_csv(out / "v.csv", index=False)
        f.to_csv(out / "f.csv", index=False)
        inputs = family_of_report(name).reports[name]["inputs"]
        execute_report(name, {inputs[0]: str(out / "v.csv"), inputs[1]: str(out / "f.csv"), "tables_dir": str(out / "tables"),
                      "out_pdf": str(out / f"{name}.pdf"), "out_png": str(out / f"{name}.png")})
        for t in family_of_report(name).reports[name]["tables"]:
            assert (out / "tables" / f"{t}.md").is_file()
        assert (out / f"{name}.png").stat().st_size > 0
        md = (out / "tables" / f"{name}.md").read_text()
        assert ("of 10 reported numbers, " in md) if case == "some" else ("of 0 reported numbers" in md)
