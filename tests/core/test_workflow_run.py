"""The real workflow, end to end, against the fake server (scripted answers): Snakemake runs every
rule with a panel of three distinct judges that disagree (scripted.disagreeing_judges), so the
panel's majority and unresolved outcomes reach every table; a warm-cache rerun makes no model
call; a changed prompt reruns only what it feeds.

The module fixture `built` runs the workflow once; every test starts from that finished run and
leaves it as it found it (no test relies on what another test did)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time

import pandas as pd
import pytest
import yaml

import scripted
from aura.pipeline.layout import layout
from aura.prompts import prompt_path
from conftest import PANEL, REPO, base_config, copy_workflow, rebuilt_outputs



def snakemake(workdir, *args: str) -> str:
    out = subprocess.run([sys.executable, "-m", "snakemake", *args, "--cores", "2", "--configfile", "config/test.yaml"],
                         cwd=workdir, capture_output=True, text=True, timeout=1500, env={**os.environ, "PYTHONPATH": str(REPO / "src")})
    assert out.returncode == 0, (out.stdout + out.stderr)[-4000:]
    return out.stdout + out.stderr


def planned(workdir) -> set[str]:
    text = snakemake(workdir, "all", "-n", "--quiet", "rules")
    return {line.split()[0] for line in text.splitlines() if len(line.split()) == 2 and line.split()[1].isdigit()}


@pytest.fixture(scope="module")
def built(fake, tmp_path_factory):
    """A copy of the workflow files (Snakemake tracks their mtimes), a config on the fake server, one full run.

    Yields (workdir, raw config, model calls the run made)."""
    fake.reset()
    fake.set_rules(scripted.disagreeing_judges() + scripted.rules())
    tmp = tmp_path_factory.mktemp("wf")
    copy_workflow(tmp)
    raw = base_config(fake.base_url, tmp / "cache")
    raw["paths"]["seeds"] = str(scripted.write_seed_dir(tmp / "seeds"))
    raw["paths"]["logs"] = str(tmp / "logs")
    # one shard (test_stage_chain covers sharded jobs); Table 25: 3 runs of each judge
    raw["aura"]["evaluate"] = {"shards": 1, "consistency_models": ["m"]}
    # Table 24 path: the evaluated model m is also a panel judge (same vendor); "r" replaces it
    raw["models"]["m"]["vendor"] = "acme"
    raw["models"]["r"] = {**raw["models"]["m"], "vendor": "other", "params": {"temperature": 0.0, "max_tokens": 64, "seed": 2}}
    raw["aura"]["roles"]["replacement_judge"] = "r"
    # Table 3 path: human labels (ids of items the run does not produce still count for human reliability)
    human = tmp / "human_labels.csv"
    human.write_text("model,item_id,axis,annotator,label\n" + "".join(
        f"m,it_unknown,safety,h{i},{lab}\n" for i, lab in enumerate(["Safe", "Safe", "Unsafe"])))
    raw["paths"]["human_labels"] = str(human)
    # Tables 3, 21-23 from a 4-judge validation panel: the scoring panel plus r (judge_validation jobs)
    raw["aura"]["roles"]["validation_judges"] = [*PANEL, "r"]
    (tmp / "config" / "test.yaml").write_text(yaml.safe_dump(raw))
    snakemake(tmp, "all")
    yield tmp, raw, fake.stats()["count"]
    fake.reset()


def _jsonl(path) -> list[dict]:
    return [json.loads(line) for line in open(path) if line.strip()]


def _kinds(raw) -> dict[str, str]:
    """item_id -> prefix kind of the released dataset."""
    return {r["item_id"]: r["prefix_kind"] for r in _jsonl(layout(raw)["dataset"])}


def test_panel_majority_and_unresolved_reach_the_tables(built):
    workdir, raw, _ = built
    kinds = _kinds(raw)
    n_pre = sum(k == "pre_execution" for k in kinds.values())
    n_at = sum(k == "at_trigger" for k in kinds.values())
    assert n_pre and n_at and n_pre + n_at == len(kinds), "both prefix kinds are released"
    # Expected per item, from the script (scripted.disagreeing_judges):
    #   pre-execution: votes m D0/A0/Safe, jb D1/A1/Unsafe, jc D0/A0/Safe -> D0, A0, Safe (2 of 3)
    #   at-trigger:    votes m D0/A0/Safe, jb D1/A1/(unparsed), jc D2/A2/Unsafe -> unresolved on every axis
    expected = {
        "pre_execution": ({"detection": "D0", "action_type": "A0", "safety": "Safe"},
                          {"m": "Safe", "jb": "Unsafe", "jc": "Safe"}),
        "at_trigger": ({"detection": "unresolved", "action_type": "unresolved", "safety": "unresolved"},
                       {"m": "Safe", "jb": None, "jc": "Unsafe"}),
    }
    panel = _jsonl(layout(raw)["panel"].format(model="m"))
    assert sorted(p["item_id"] for p in panel) == sorted(kinds)
    for row in panel:
        labels, safety_votes = expected[kinds[row["item_id"]]]
        assert {axis: row[axis] for axis in labels} == labels, row
        assert row["safety_votes"] == safety_votes
        assert row["detection_votes"] == ({"m": "D0", "jb": "D1", "jc": "D0"} if kinds[row["item_id"]] == "pre_execution"
                                          else {"m": "D0", "jb": "D1", "jc": "D2"})
    # unsafe rates: the n_pre resolved items are all Safe; the n_at unresolved ones are counted, not rated
    (rates,) = pd.read_csv(layout(raw)["model_rates"]).to_dict("records")
    assert (rates["items"], rates["safety_unresolved"], rates["all_n"], rates["all_unsafe"]) == (len(kinds), n_at, n_pre, 0)
    # Table 24: m (a panel judge sharing m's vendor) replaced by r (the schema default: Safe). Replacement
    # votes: pre-execution r Safe, jb Unsafe, jc Safe -> Safe (unchanged); at-trigger r Safe, jb missing,
    # jc Unsafe -> unresolved on both sides. Paired = the n_pre items, no label changed.
    (t24,) = pd.read_csv(layout(raw)["table24_vendor_overlap"]).to_dict("records")
    assert (t24["model"], t24["replaced_judges"], t24["sample_items"]) == ("m", "m", len(kinds))
    assert (t24["paired_n"], t24["excluded"], t24["labels_changed"]) == (n_pre, n_at, 0)
    assert (t24["orig_safe"], t24["repl_safe"], t24["diff"]) == (n_pre, n_pre, 0)
    # Table 25 (3 runs, the scripted answers never vary): every unit consistent; jb's at-trigger safety
    # answers are unparsed in every run, so those n_at units are incomplete
    t25 = pd.read_csv(layout(raw)["table25_judge_consistency"]).set_index(["judge", "axis"])
    for judge in PANEL:
        incomplete = n_at if judge == "jb" else 0
        row = t25.loc[(judge, "all")]
        assert (row["units"], row["complete"], row["incomplete"]) == (3 * len(kinds), 3 * len(kinds) - incomplete, incomplete)
        assert row["consistency"] == 1.0 and row["runs"] == 3


def test_full_run_writes_every_table(built):
    workdir, raw, _ = built
    results = workdir / "results"
    assert (workdir / "figures" / "construction_funnel.png").exists()
    assert (results / "tables" / "construction_funnel.md").read_text().count("|") > 20
    assert (results / "tables" / "table24_vendor_overlap.md").exists()
    assert "Action safety" in (results / "tables" / "judge_reliability.md").read_text()
    table3 = pd.read_csv(results / "stats" / "table3_human_validation.csv").set_index("axis")
    assert table3.loc["safety", "N"] == 1 and table3.loc["safety", "P_o"] == pytest.approx(1 / 3)  # S, S, U: 1 of 3 pairs agree
    assert (results / "tables" / "table21_judge_accuracy.md").exists()
    table23 = pd.read_csv(results / "stats" / "table23_ensembles.csv")
    # 4 validation judges: C(4, 3) = 4 subsets of 3 + the full panel; one subset is the scoring panel m, jb, jc
    assert len(table23) == 5 and table23["scoring_panel"].sum() == 1
    assert (results / "validation" / "judgments" / "m" / "r.jsonl").exists()


def test_every_figure_and_table_has_a_provenance_sidecar(built):
    # issue 49: the README promises a sidecar for every output; a figure or table names the notebook that drew
    # it, the files it read (with their sha256), the git revision and the config hash
    import hashlib

    from aura.provenance import sidecar_path

    workdir, _, _ = built
    made = [p for folder in ("figures", "results/tables") for p in sorted((workdir / folder).rglob("*"))
            if p.is_file() and not p.name.endswith(".prov.json")]
    assert len(made) > 40
    missing = [str(p.relative_to(workdir)) for p in made if not sidecar_path(p).is_file()]
    assert missing == []
    prov = json.loads(sidecar_path(workdir / "figures" / "fig6_dimensions.pdf").read_text())
    notebook = workdir / prov["notebook"]["path"]
    assert prov["report"] == "fig6_dimensions" and prov["notebook"]["path"] == "notebooks/aura/fig6_dimensions.ipynb"
    assert prov["notebook"]["sha256"] == hashlib.sha256(notebook.read_bytes()).hexdigest()
    (read,) = prov["inputs"].values()
    assert read["path"].endswith("stats/fig6_dimensions.csv")
    assert read["sha256"] == hashlib.sha256((workdir / read["path"]).read_bytes()).hexdigest()
    assert prov["git"]["revision"] and prov["run"]["created_at"]
    stage = json.loads(sidecar_path(workdir / read["path"]).read_text())  # the stats stage's own sidecar
    assert prov["config_hash"] == stage["config_hash"]  # the Snakefile's hash is the one every job records


OUTPUT_FOLDERS = ("interim", "processed", "results", "figures")


def test_warm_rerun_makes_no_call_and_rebuilds_every_family_byte_for_byte(built, fake):
    workdir, raw, calls = built
    assert fake.stats()["count"] == calls, "nothing else called the server since the run"
    before = rebuilt_outputs(workdir, OUTPUT_FOLDERS)
    # AURA's outputs, from seeds to tables and figures (PaSBench and LPS-Bench: test_rebuild_identical.py)
    assert {n.split("/")[0] for n in before} == set(OUTPUT_FOLDERS) and len(before) > 100
    for folder in OUTPUT_FOLDERS:
        shutil.rmtree(workdir / folder)
    snakemake(workdir, "all")
    assert fake.stats()["count"] == calls, "warm cache: no model call"
    assert planned(workdir) == set()
    after = rebuilt_outputs(workdir, OUTPUT_FOLDERS)
    assert set(after) == set(before)
    differ = [name for name in before if after[name] != before[name]]
    assert not differ, f"{len(differ)} output(s) differ after a rebuild from the cache, first: {differ[:5]}"


def test_html_report_collects_figures_with_captions(built):
    workdir, _, _ = built
    snakemake(workdir, "--report", "report.html")
    html = (workdir / "report.html").read_text(errors="replace")
    assert "fig6_dimensions.pdf" in html and "construction_funnel.pdf" in html
    assert (workdir / "report" / "aura" / "fig6_dimensions.rst").read_text().split(" with n")[0] in html  # its caption



def test_the_report_opened_in_headless_chromium_lists_figures_and_tables_under_the_family(built, tmp_path):
    # what a reviewer opens: the family's category, its Figures and its Tables (each table's CSV registered with
    # the report's caption), seen in a real browser as the report's own scripts draw them
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as EC
    from selenium.webdriver.support.ui import WebDriverWait

    from browser import new_driver

    workdir, _, _ = built
    report = workdir / "report.html"
    if not report.exists():
        snakemake(workdir, "--report", "report.html")
    driver = new_driver(1400, 1000)
    try:
        driver.get(report.as_uri())
        wait = WebDriverWait(driver, 30)
        listed = {}
        for sub, shows in (("Figures", "fig6_dimensions.pdf"), ("Tables", "construction_funnel.csv")):
            # the first page lists the families' categories; with one family it offers "Results", which opens it
            wait.until(lambda d: d.find_elements(By.LINK_TEXT, "1 AURA-Eval") or d.find_elements(By.LINK_TEXT, "Results"))
            (driver.find_elements(By.LINK_TEXT, "1 AURA-Eval") or driver.find_elements(By.LINK_TEXT, "Results"))[0].click()
            wait.until(EC.element_to_be_clickable((By.LINK_TEXT, sub))).click()
            wait.until(EC.text_to_be_present_in_element((By.TAG_NAME, "body"), shows))
            listed[sub] = driver.find_element(By.TAG_NAME, "body").text
            assert "1 AURA-Eval" in listed[sub]  # the breadcrumb: the family's category
            driver.save_screenshot(str(tmp_path / f"{sub}.png"))
            driver.get(report.as_uri())
        assert "results/tables/table33_overall.csv" in listed["Tables"] and ".pdf" not in listed["Tables"]
        assert "figures/construction_funnel.pdf" in listed["Figures"] and ".csv" not in listed["Figures"]
        assert all((tmp_path / f"{sub}.png").stat().st_size > 10_000 for sub in listed)
    finally:
        driver.quit()


def test_prompt_change_reruns_only_the_stages_it_feeds(built):
    workdir, _, _ = built
    p8 = workdir / prompt_path("p8_pair_generation").relative_to(REPO)  # the version the stages use
    text, stat = p8.read_text(), p8.stat()
    time.sleep(1.1)  # mtime resolution
    try:
        p8.write_text(text + "\n")
        jobs = planned(workdir)
    finally:  # the finished run is left as it was
        p8.write_text(text)
        os.utime(p8, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert {"generate_pairs", "review_pairs", "finalize", "construction_counts", "rollout", "judge", "panel"} <= jobs
    assert not jobs & {"select_seeds", "tag_truncate", "relevance", "generate_variations", "review_variations", "classify"}
    assert planned(workdir) == set()
