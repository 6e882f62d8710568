"""A plugin family may be named after any word the core uses: tests/plugin/batchfam/ registers the family
`batch` (the core has a batch API), with the stage `batch-refusal`, the prompt `refusal` (a provider's stop
reason in the core) and the report `batch_stats` (the core has aura.stats). Installed by pip into a folder of
this test and put on the path, it is registered beside the built-in families, and the repository's family and
boundary tests (test_boundary.py, test_families.py, test_import_graph.py) pass in a pytest run that sees it.
Its workflow part is real too: with `batch.judge` set the dry run plans its job and its report, without it the
family (on, as every installed family is by default) plans nothing.
"""
from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml

from conftest import REPO, base_config, copy_workflow
from test_boundary import _identifiers, _sources, _strings, family_of
from test_families import job_counts
from test_plugin_family import pip_install

PACKAGE = Path(__file__).parent / "batchfam"
SUITE = ("tests/core/test_boundary.py", "tests/core/test_families.py", "tests/core/test_import_graph.py")


@pytest.fixture(scope="module")
def env(tmp_path_factory) -> dict[str, str]:
    """The environment of a process that has the plugin installed (pip, into a folder on PYTHONPATH)."""
    site = pip_install(PACKAGE, tmp_path_factory.mktemp("plugin"), "aura_batchfam")
    clean = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}  # this run's own settings
    return {**clean, "PYTHONPATH": os.pathsep.join([str(site), str(REPO / "src")])}


def test_the_plugins_names_are_words_of_the_core():
    """So the run below means something: the core's code holds them (a check by name would trip on them)."""
    trees = [ast.parse(text) for module, (_, text) in _sources().items() if family_of(module) is None]
    strings = {s for tree in trees for s in _strings(tree)}
    identifiers = {w.lower() for tree in trees for w in _identifiers(tree)}
    assert {"batch", "refusal"} <= strings
    assert {"batch", "refusal", "stats"} <= {part for w in identifiers for part in w.split("_")}


def test_the_family_and_boundary_tests_pass_with_a_plugin_named_after_core_words(env, tmp_path):
    show = ("import json; from aura.families import load, names; f = load('batch'); print(json.dumps([names(), "
            "sorted(f.stages), sorted(f.layout({'paths': {'results': 'r'}})), sorted(f.reports), sorted(f.prompts)]))")
    seen = subprocess.run([sys.executable, "-c", show], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=60)
    assert seen.returncode == 0, seen.stderr[-3000:]
    registered, *owned = json.loads(seen.stdout)
    assert registered[:3] == ["aura", "pasbench", "lpsbench"] and "batch" in registered, registered
    assert owned == [["batch-refusal"], ["batch_refusals"], ["batch_stats"], ["refusal"]]

    report = tmp_path / "junit.xml"
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider",
                          f"--junitxml={report}", *SUITE], cwd=REPO, env=env, capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, (run.stdout + run.stderr)[-4000:]
    cases = ET.parse(report).getroot().iter("testcase")
    by_file = {}
    for case in cases:
        assert not [c.tag for c in case], f"{case.get('name')}: {[c.tag for c in case]}"  # no skip, failure, error
        by_file.setdefault(case.get("classname").rsplit(".", 1)[-1], []).append(case.get("name"))
    assert sorted(by_file) == sorted(Path(f).stem for f in SUITE) and all(by_file.values()), by_file


def test_the_plugins_workflow_plans_its_job_with_a_judge_and_nothing_without(env, tmp_path):
    work = copy_workflow(tmp_path / "wf")
    planned = {}
    for judge in ("m", None):
        raw = {**base_config("http://127.0.0.1:9/v1", tmp_path / "cache"), "families": ["batch"]}
        if judge:
            raw["batch"] = {"judge": judge}
        (work / "config" / "batch.yaml").write_text(yaml.safe_dump(raw))
        run = subprocess.run([sys.executable, "-m", "snakemake", "-n", "all", "--quiet", "rules", "--configfile",
                              "config/batch.yaml"], cwd=work, env=env, capture_output=True, text=True, timeout=300)
        assert run.returncode == 0, (run.stdout + run.stderr)[-3000:]
        planned[judge] = job_counts(run.stdout + run.stderr)
    assert planned == {"m": {"batch_refusal": 1, "render_batch_stats": 1, "all": 1, "total": 3},
                       None: {"all": 1, "total": 1}}
