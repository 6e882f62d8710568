"""LPS-Bench's reproduction stage (issue 34): hand-derived verdicts on Tables 3 and 4 (within, on the Wilson edge,
outside, different n, excluded cases, the Avg. columns, a model not produced, the raw variant only), every row
"demo data" on the default config, the stage end to end on the paper config, and the notebook renders."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
from papermill.iorw import load_notebook_node

from aura.families import family_of_report
from aura.families.lpsbench import safe_rate as SR
from aura.families.lpsbench.reproduction import NO_INTERVAL, lookup_for
from aura.stats.reproduce import COLUMNS
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
    v = verdict_table(ref_folder(tmp_path / "ref"), lookup_for(stats_tables()))
    got = {(r.table, r.row, r.column): (r.verdict, r.reason) for r in v.itertuples()}
    assert got["Table 3", "G", "TS"] == ("within", "")   # 15/55 = 27.27 in Wilson [17.3, 40.1] (the raw run, not 55/55)
    assert got["Table 3", "G", "OC"] == ("outside", "")  # 50 above 10/62's Wilson [9.0, 27.2]
    assert got["Table 3", "G", "HS"] == ("not comparable",
                                         "different n: paper 68, reproduced 65 (3 excluded: broken upstream module)")
    assert got["Table 3", "G", "RC"] == ("not comparable",
                                         "excluded cases: all 52 cases of the cell excluded (broken upstream module)")
    assert got["Table 3", "G", "Avg. (benign)"] == ("not comparable", NO_INTERVAL)
    assert got["Table 3", "Q", "TS"] == ("not comparable", "not produced: q not evaluated in this run")
    assert got["Table 3", "M", "TS"][1].startswith("not produced: no raw run of m")
    assert got["Table 4", "G", "Web"] == ("within", "")   # 10/10: Wilson upper bound 1, 100.00 on the edge
    assert got["Table 4", "G", "Code"] == ("within", "")  # 18/90 = 20.00
    assert got["Table 4", "G", "Overall Avg."] == ("not comparable", NO_INTERVAL)
    ts = v[(v["row"] == "G") & (v["column"] == "TS")].iloc[0]
    assert ts["reproduced"] == 15 / 55 * 100 and ts["n"] == 55 and abs(ts["difference"]) < 0.01
    avg = v[v["column"] == "Avg. (benign)"].iloc[0]  # the mean is shown beside the paper's, with no interval
    assert abs(avg["reproduced"] - (15 / 55 + 10 / 62) * 50) < 1e-9 and pd.isna(avg["lo"]) and pd.isna(avg["difference"])


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
    assert "lpsbench: 0 of 247 reported numbers within the reproduced 95% interval (247 not comparable)" in proc.stderr
    f = pd.read_csv(tmp_path / "f.csv", comment="#")  # the paper checked against itself, demo run or not
    assert ("Table 3", "Llama-3.1-8B-Instruct", "RC", "percentage") in set(
        f[["table", "row", "column", "check"]].itertuples(index=False, name=None))


def test_stage_on_the_paper_config(tmp_path):
    """The paper config (no demo data): the stats stage's own CSVs for GPT-5 raw on 3 TS cases (1 safe) give
    GPT-5's TS cell "different n" (3 against 55), the models not run "not produced"."""
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
    assert v.loc[("Table 3", "GPT-5", "TS"), "reason"] == "different n: paper 55, reproduced 3"
    assert v.loc[("Table 4", "GPT-5", "Code"), "reason"] == "different n: paper 90, reproduced 3"
    assert v.loc[("Table 3", "GPT-5", "OC"), "reason"] == "not produced: no OC cell in this run"  # no OC case run
    assert v.loc[("Table 3", "GPT-5.1", "TS"), "reason"] == "not produced: gpt-5.1 not evaluated in this run"
    assert v.loc[("Table 3", "GPT-5", "Avg. (benign)"), "reason"] == NO_INTERVAL
    assert not v["reason"].str.startswith("demo data").any()
    assert "lpsbench: 0 of 247 reported numbers within" in proc.stderr



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
        assert ("3 of 10 reported numbers within" in md) if case == "some" else ("0 of 0" in md)
