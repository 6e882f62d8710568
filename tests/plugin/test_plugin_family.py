"""A fourth family plugs in without editing the core: tests/plugin/toyfam/ is a package of its own (one
model-calling stage through the LLM layer, one rule, one prompt, one notebook, one caption, its demo items),
installed with pip into a folder of this test, and found through its `aura.families` entry point only.

With it on the path (PYTHONPATH, as an installed package would be), against the fake server:
- Snakemake runs it end to end on a copy of the workflow: its rule, its stage's model calls, the core's
  render rule for its notebook (table rows counted by hand: the fake answers "yes" to every question but
  the fire one, which gets "no");
- the end-of-run summary lists its stage; `aura estimate` lists its line (role judge, priced);
  `aura view --export` has its family page;
- without it on the path the same config is refused with one line (the family is not registered);
- the repository's working tree is unchanged by all of it.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import REPO, base_config, copy_workflow

PACKAGE = Path(__file__).parent / "toyfam"
RULES = [{"match": {"contains": "fire"}, "json": {"answer": "no"}}, {"match": {}, "json": {"answer": "yes"}}]


def _git_status() -> str | None:
    out = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=REPO,
                         capture_output=True, text=True)
    return out.stdout if out.returncode == 0 else None


def pip_install(package: Path, tmp: Path, dist: str) -> Path:
    """A plugin package installed by pip (from a copy: pip builds in the source folder) into tmp/site."""
    source = shutil.copytree(package, tmp / "src", ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    target = tmp / "site"
    out = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-input",
                          "--disable-pip-version-check", "--target", str(target), str(source)],
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, f"pip could not install the plugin: {(out.stdout + out.stderr)[-3000:]}"
    assert list(target.glob(f"{dist}-*.dist-info")), "no dist-info: the entry point would not be found"
    return target


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    return pip_install(PACKAGE, tmp_path_factory.mktemp("plugin"), "aura_toyfam")


@pytest.fixture
def workflow(tmp_path, server) -> Path:
    work = copy_workflow(tmp_path / "wf")
    raw = base_config(server.base_url, tmp_path / "cache")
    raw.update(families=["toyfam"], toyfam={"model": "m"})
    (work / "config" / "test.yaml").write_text(yaml.safe_dump(raw))
    server.set_rules(RULES)
    return work


def _run(work: Path, site: Path | None, *args: str) -> subprocess.CompletedProcess:
    path = [str(site)] if site else []
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([*path, str(REPO / "src")])}
    return subprocess.run([sys.executable, "-m", *args], cwd=work, capture_output=True, text=True, timeout=900,
                          env=env)


def test_a_plugin_family_runs_end_to_end(site, workflow, tmp_path, server):
    before = _git_status()
    run = _run(workflow, site, "snakemake", "all", "--cores", "2", "--configfile", "config/test.yaml")
    assert run.returncode == 0, (run.stdout + run.stderr)[-4000:]
    results = tmp_path / "results"
    rows = [json.loads(line) for line in (results / "toyfam" / "answers.jsonl").read_text().splitlines()]
    assert [(r["item_id"], r["status"], r["answer"]) for r in rows] == [
        ("toy-1", "ok", "yes"), ("toy-2", "ok", "no"), ("toy-3", "ok", "yes")]
    sidecar = json.loads((results / "toyfam" / "answers.jsonl.prov.json").read_text())
    own = sidecar["prompts"]["toyfam_answer.v1"]  # the plugin's own prompt file, read from its package, hashed
    assert Path(own["path"]).is_relative_to(site) and len(own["sha256"]) == 64
    table = (results / "tables" / "toyfam_answers.csv").read_text().splitlines()
    assert table == ["model,answer,items", "m,no,1", "m,yes,2"]
    assert sum(1 for r in server.requests() if r["path"].endswith("/chat/completions")) == 3
    # the end-of-run summary (the Snakefile's onsuccess handler) counts the plugin's stage
    assert "aura summary: toyfam-answer (1 job): items ok=3 unparsed=0 failed=0" in run.stderr

    est = _run(workflow, site, "aura", "estimate", "--configfile", "config/test.yaml")
    assert est.returncode == 0, est.stderr
    line = next(x for x in est.stdout.splitlines() if x.startswith("toyfam-answer"))
    # the plugin's line: its calls projected by its own hook, its tokens measured (*): the run's calls log holds
    # 3 answered calls of that model, role and prompt
    assert line.split()[1:4] == ["m", "projected*", "3"], line

    export = tmp_path / "site"
    view = _run(workflow, site, "aura", "view", "--configfile", "config/test.yaml", "--export", str(export))
    assert view.returncode == 0, view.stderr
    assert "toyfam: 3 rows" in view.stdout
    pages = "".join(p.read_text() for p in export.glob("*.html"))
    assert "Toy family" in pages and "toy-2" in pages

    assert _git_status() == before  # nothing in the repository was written or edited


def test_without_the_plugin_the_family_is_refused_in_one_line(workflow):
    out = _run(workflow, None, "aura", "estimate", "--configfile", "config/test.yaml")
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "families: toyfam not registered" in lines[0], out.stderr
