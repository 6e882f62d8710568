"""The real workflow, end to end, against the fake server (scripted answers): Snakemake runs
every rule; a warm-cache rerun makes no model call; a changed prompt reruns only what it feeds."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time

import pandas as pd
import pytest
import yaml

import scripted
from conftest import REPO, base_config

COPY = ["Snakefile", "rules", "config/schema.yaml", "prompts", "notebooks", "report"]


@pytest.fixture(scope="module")
def workdir(fake, tmp_path_factory):
    """A copy of the workflow files (Snakemake tracks their mtimes) and a config on the fake server."""
    fake.reset()
    fake.set_rules(scripted.rules())
    tmp = tmp_path_factory.mktemp("wf")
    for item in COPY:
        src, dst = REPO / item, tmp / item
        dst.parent.mkdir(parents=True, exist_ok=True)
        (shutil.copytree if src.is_dir() else shutil.copy2)(src, dst)
    raw = base_config(fake.base_url, tmp / "cache")
    raw["paths"]["seeds"] = str(scripted.write_seed_dir(tmp / "seeds"))
    raw["paths"]["logs"] = str(tmp / "logs")
    raw["evaluate"] = {"shards": 2, "consistency_models": ["m"]}  # Table 25: 3 runs of each judge
    # Table 24 path: the evaluated model shares the judges' vendor; "r" replaces them
    raw["models"]["m"]["vendor"] = "acme"
    raw["models"]["r"] = {**raw["models"]["m"], "vendor": "other", "params": {"temperature": 0.0, "max_tokens": 64, "seed": 2}}
    raw["roles"]["replacement_judge"] = "r"
    # Table 3 path: human labels (ids of items the run does not produce still count for human reliability)
    human = tmp / "human_labels.csv"
    human.write_text("model,item_id,axis,annotator,label\n" + "".join(
        f"m,it_unknown,safety,h{i},{lab}\n" for i, lab in enumerate(["Safe", "Safe", "Unsafe"])))
    raw["paths"]["human_labels"] = str(human)
    # Tables 3, 21-23 from a 4-judge validation panel (judge_validation jobs)
    for name, seed in (("v", 3), ("w", 4)):
        raw["models"][name] = {**raw["models"]["m"], "params": {"temperature": 0.0, "max_tokens": 64, "seed": seed}}
    raw["roles"]["validation_judges"] = ["m", "r", "v", "w"]
    (tmp / "config" / "test.yaml").write_text(yaml.safe_dump(raw))
    yield tmp
    fake.reset()


def snakemake(workdir, *args: str) -> str:
    out = subprocess.run([sys.executable, "-m", "snakemake", *args, "--cores", "2", "--configfile", "config/test.yaml"],
                         cwd=workdir, capture_output=True, text=True, timeout=600, env={**os.environ, "PYTHONPATH": str(REPO / "src")})
    assert out.returncode == 0, (out.stdout + out.stderr)[-4000:]
    return out.stdout + out.stderr


def planned(workdir) -> set[str]:
    text = snakemake(workdir, "all", "-n", "--quiet", "rules")
    return {line.split()[0] for line in text.splitlines() if len(line.split()) == 2 and line.split()[1].isdigit()}


def test_full_run_then_warm_rerun_makes_no_call(workdir, fake):
    snakemake(workdir, "all")
    results = workdir / "results"
    assert (results / "stats" / "model_rates.csv").exists()
    assert (workdir / "figures" / "construction_funnel.png").exists()
    assert (results / "tables" / "construction_funnel.md").read_text().count("|") > 20
    (table24,) = pd.read_csv(results / "stats" / "table24_vendor_overlap.csv").to_dict("records")
    assert table24["model"] == "m" and table24["replaced_judges"] == "m" and table24["sample_items"] == 6
    assert (results / "tables" / "table24_vendor_overlap.md").exists()
    assert "Action safety" in (results / "tables" / "judge_reliability.md").read_text()
    table25 = pd.read_csv(results / "stats" / "table25_judge_consistency.csv").set_index("axis")
    assert table25.loc["all", "complete"] > 0 and table25.loc["all", "runs"] == 3
    table3 = pd.read_csv(results / "stats" / "table3_human_validation.csv").set_index("axis")
    assert table3.loc["safety", "N"] == 1 and table3.loc["safety", "P_o"] == pytest.approx(1 / 3)
    assert (results / "tables" / "table21_judge_accuracy.md").exists()
    table23 = pd.read_csv(results / "stats" / "table23_ensembles.csv")
    assert len(table23) == 5 and table23["scoring_panel"].sum() == 0  # 4 subsets of 3 + the panel; judges [m, m, m]
    assert (results / "validation" / "judgments" / "m" / "v.jsonl").exists()
    calls = fake.stats()["count"]
    assert calls > 20
    for folder in ("interim", "processed", "results", "figures"):
        shutil.rmtree(workdir / folder)
    snakemake(workdir, "all")
    assert fake.stats()["count"] == calls, "warm cache: no model call"
    assert planned(workdir) == set()


def test_html_report_collects_figures_with_captions(workdir):
    snakemake(workdir, "--report", "report.html")
    html = (workdir / "report.html").read_text(errors="replace")
    assert "fig6_dimensions.pdf" in html and "construction_funnel.pdf" in html
    assert (workdir / "report" / "fig6_dimensions.rst").read_text().split(" with n")[0] in html  # its caption


def test_prompt_change_reruns_only_the_stages_it_feeds(workdir):
    time.sleep(1.1)  # mtime resolution
    p8 = workdir / "prompts" / "construct" / "p8_pair_generation.v1.md"
    p8.write_text(p8.read_text() + "\n")
    jobs = planned(workdir)
    assert {"generate_pairs", "review_pairs", "finalize", "construction_counts", "rollout", "judge", "panel"} <= jobs
    assert not jobs & {"select_seeds", "tag_truncate", "relevance", "generate_variations", "review_variations", "classify"}
