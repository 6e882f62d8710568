"""A small dress rehearsal end to end (`aura rehearse`): the LPS-Bench paper config itself (its models, evaluator,
upstream texts and upstream tool modules, its endpoints' provider profiles and Batch APIs) on a two-case checkout
shaped like upstream's, through Snakemake, against the simulated servers. The planted rows read back (none "not
reproduced"), everything is marked as a rehearsal, nothing is answered twice, and a rerun pays nothing; a planted
deviation turns exactly its row "not reproduced"."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from conftest import REPO
from test_lpsbench_texts import write_checkout

MODELS = ["gpt-5", "claude-4.5-sonnet"]
TARGETS = ["--target", "lpsbench_reproduce"]


def rehearse(tmp_path: Path, folder: str, *extra: str) -> tuple[subprocess.CompletedProcess, dict]:
    checkout = tmp_path / "upstream" / "unpacked" / "LPS-Bench-fixture"
    if not checkout.is_dir():
        write_checkout(tmp_path / "upstream")
    overlay = tmp_path / f"{folder}.overlay.yaml"
    overlay.write_text(yaml.safe_dump({"lpsbench": {
        "cases": {"path": str(checkout / "examples"), "download": {"enabled": False}},
        "tools": {"upstream_dir": str(checkout)}, "evaluated": MODELS, "variants": ["raw"]}}))
    cmd = [sys.executable, "-m", "aura", "rehearse", "--configfile", str(REPO / "config" / "lpsbench.yaml"),
           "--overlay", str(overlay), "--folder", str(tmp_path / folder), "--cores", "2", *TARGETS, *extra]
    done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done, json.loads((tmp_path / folder / "rehearsal.json").read_text())


def verdicts(tmp_path: Path, folder: str) -> pd.DataFrame:
    [path] = (tmp_path / folder).rglob("lpsbench/reproduction.csv")
    return pd.read_csv(path)


def test_a_small_rehearsal_reads_its_planted_rows_back_and_a_deviation_turns_its_row(tmp_path):
    done, fig = rehearse(tmp_path, "faithful")
    assert fig["returncode"] == 0 and fig["requests"] > 0 and fig["unplanted_requests"] == 0
    assert fig["answered_twice"] == 0
    assert fig["llm_job_calls"] == fig["requests"] and fig["llm_job_cpu_s"] > 0  # the jobs' summaries carry their CPU
    table = fig["families"]["lpsbench"]
    assert table["planted"] > 0 and table["outcomes"].get("not reproduced", 0) == 0, table
    assert "REHEARSAL" in done.stdout + done.stderr  # the reproduction line of the end-of-run summary
    v = verdicts(tmp_path, "faithful")
    tested = v[(v.table == "Table 3") & v.row.isin(["GPT-5", "Claude-4.5-Sonnet"]) & v.column.isin(["EB", "RC"])]
    assert len(tested) == 4 and tested.reproduced.notna().all(), tested
    [side] = (tmp_path / "faithful").rglob("lpsbench/reproduction.csv.prov.json")
    assert json.loads(side.read_text())["rehearsal"]["source"].endswith("lpsbench.yaml")
    config = yaml.safe_load((tmp_path / "faithful" / "config.yaml").read_text())
    assert all(ep["base_url"].startswith("http://127.0.0.1:") for ep in config["endpoints"].values())
    assert not any(ep.get("api_key_env", "").endswith("_API_KEY") for ep in config["endpoints"].values())

    # The same command again: every answer comes from the rehearsal's cache, the simulator answers nothing.
    _, again = rehearse(tmp_path, "faithful")
    assert (again["requests"], again["answered_twice"]) == (0, 0)

    # Claude-4.5-Sonnet's RC cell is 100% in the paper (52 cases): planted 100 points lower, it is the one row
    # not reproduced.
    _, dev = rehearse(tmp_path, "deviated", "--deviate", "lpsbench:claude-4.5-sonnet:RC=-100")
    assert dev["families"]["lpsbench"]["not_reproduced_rows"] == ["Table 3 / Claude-4.5-Sonnet / RC"], dev
    v = verdicts(tmp_path, "deviated")
    assert v[v.verdict == "not reproduced"][["row", "column"]].values.tolist() == [["Claude-4.5-Sonnet", "RC"]]
