"""Benchmark families: every family's rules, prompts, notebooks and captions are found by the same rule
(rules/<family>/*.smk, prompts/<family>/, notebooks/<family>/, report/<family>/<report>.rst), names are
unique across families, and the workflow builds its DAG for each family alone and for all of them."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from aura.config import ConfigError, validate_config
from aura.families import FAMILIES, Family, Stage, all_families, enabled, load, merged
from aura.pipeline.layout import layout
from aura.pipeline.registry import STAGES
from aura.pipeline.rules_support import REPORTS, caption
from aura.prompts import VERSIONS, prompt_file
from conftest import REPO, base_config, copy_workflow

SHARED_PROMPTS = Path("prompts") / "llm"  # the LLM layer's own prompts (JSON / rule repair), used by every family


def raw_config(tmp_path, **extra) -> dict:
    return {**base_config("http://127.0.0.1:9/v1", tmp_path / "cache"), **extra}


def files_under(folder: Path, pattern: str) -> set[str]:
    """Repository-relative paths of the files matching `pattern` anywhere under `folder`."""
    return {str(p.relative_to(REPO)) for p in (REPO / folder).rglob(pattern)}


# --- the registry ---------------------------------------------------------------------------------------


def test_every_registered_family_loads_under_its_own_name():
    for name in FAMILIES:
        family = load(name)
        assert isinstance(family, Family) and family.name == name and family.title
        assert (family.rules_dir, family.prompts_dir, family.notebooks_dir, family.report_dir) == (
            Path("rules") / name, Path("prompts") / name, Path("notebooks") / name, Path("report") / name)


def test_the_schema_lists_exactly_the_registered_families():
    schema = yaml.safe_load((REPO / "config" / "schema.yaml").read_text())
    prop = schema["properties"]["families"]
    assert prop["items"]["enum"] == list(FAMILIES) and prop["default"] == list(FAMILIES)


def test_enabled_families_follow_the_config_in_its_order(tmp_path):
    default = validate_config(raw_config(tmp_path)).raw
    assert [f.name for f in enabled(default)] == list(FAMILIES)  # the schema default: every family
    only = validate_config(raw_config(tmp_path, families=["pasbench"])).raw
    assert [f.name for f in enabled(only)] == ["pasbench"]
    both = validate_config(raw_config(tmp_path, families=["pasbench", "aura"])).raw
    assert [f.name for f in enabled(both)] == ["pasbench", "aura"]


@pytest.mark.parametrize("families, message", [
    (["aura", "nope"], f"families/1: 'nope' is not one of {list(FAMILIES)}"),
    (["aura", "aura"], "families: ['aura', 'aura'] has non-unique elements"),
    ([], "families: [] should be non-empty"),
])
def test_a_wrong_families_list_stops_with_one_line(tmp_path, families, message):
    with pytest.raises(ConfigError) as err:
        validate_config(raw_config(tmp_path, families=families))
    assert message in str(err.value) and "\n" not in str(err.value)


def test_an_unknown_family_name_is_refused_by_the_registry():
    with pytest.raises(ValueError) as err:
        load("nope")
    assert str(err.value) == f"unknown family 'nope' (known: {', '.join(FAMILIES)})"


# --- merged views: stages, layout, reports ----------------------------------------------------------------


def test_stage_names_layout_keys_and_reports_are_unique_across_families(tmp_path):
    raw = validate_config(raw_config(tmp_path)).raw
    families = all_families()
    # the merged views hold every family's entries, none lost to a shared name
    assert len(STAGES) == sum(len(f.stages) for f in families)
    assert len(layout(raw)) == sum(len(f.layout(raw)) for f in families)
    assert len(REPORTS) == sum(len(f.reports) for f in families)
    # the AURA core keeps its names; every other family prefixes its own (contract of issue 10)
    for f in families:
        if f.name == "aura":
            continue
        assert all(s.startswith(f"{f.name}-") for s in f.stages), f.name
        assert all(k.startswith(f"{f.name}_") for k in f.layout(raw)), f.name
        assert all(r.startswith(f"{f.name}_") for r in f.reports), f.name


def test_a_name_two_families_share_is_an_error_naming_both():
    def fam(name, stages):
        return Family(name=name, title=name, stages=stages, layout=lambda raw: {}, reports={}, targets=lambda c: [])

    one = fam("one", {"go": Stage("first", "aura.families.aura.evaluate.rollout:run")})
    two = fam("two", {"go": Stage("second", "aura.families.aura.evaluate.judge:run"), "stop": Stage("x", "aura.families.aura.evaluate.panel:run")})
    with pytest.raises(ValueError, match="stage 'go' is defined by both family 'one' and 'two'"):
        merged("stage", lambda f: f.stages, [one, two])
    # without the clash the merge keeps every entry: 1 + 1 = 2 stages
    assert list(merged("stage", lambda f: f.stages, [one, fam("two", {"stop": Stage("x", "aura.families.aura.evaluate.panel:run")})])) \
        == ["go", "stop"]


def test_every_stage_names_an_importable_function_and_manifests_import_nothing_heavy():
    for name, stage in STAGES.items():
        assert callable(stage.entry()), name
    # a manifest does not import its stages' modules: a fresh interpreter loading every family has no pandas
    code = ("import sys, aura.families as F, aura.pipeline.registry; F.all_families(); "
            "print(sorted({'pandas', 'scipy', 'openai'} & set(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "[]", out.stdout + out.stderr[-2000:]


def test_a_stage_target_is_module_colon_function():
    with pytest.raises(ValueError, match="stage target 'aura.families.aura.evaluate.rollout.run' is not 'package.module:function'"):
        Stage("old dotted form", "aura.families.aura.evaluate.rollout.run")


# --- files found by the same rule for every family --------------------------------------------------------


def test_every_rules_file_lies_in_a_registered_family_folder():
    smk = files_under(Path("rules"), "*.smk")
    by_family = {name: files_under(load(name).rules_dir, "*.smk") for name in FAMILIES}
    for name, files in by_family.items():
        assert files, f"family {name}: no rules/{name}/*.smk"
    assert smk == set().union(*by_family.values()), "a .smk outside rules/<family>/"


def test_every_prompt_in_use_lies_under_one_family_or_the_shared_llm_folder():
    homes = [load(name).prompts_dir for name in FAMILIES] + [SHARED_PROMPTS]
    for name in VERSIONS:
        path = Path(prompt_file(name))
        assert (REPO / path).is_file(), f"{name}: {path} missing"
        owners = [home for home in homes if home in path.parents]
        assert len(owners) == 1, f"{name}: {path} is under {owners}, not exactly one family's prompts/"
    loose = sorted(p.name for p in (REPO / "prompts").iterdir() if p.is_file())
    assert not loose, f"prompt files directly under prompts/ (not in a family's folder or prompts/llm/): {loose}"


def test_every_family_notebook_is_a_report_and_every_report_notebook_lies_in_its_family():
    for name in FAMILIES:
        family = load(name)
        used = {spec["notebook"] for spec in family.reports.values()}
        for report, spec in family.reports.items():
            assert Path(spec["notebook"]).parent == family.notebooks_dir, f"{name}/{report}: {spec['notebook']}"
        assert files_under(family.notebooks_dir, "*.ipynb") == used, f"family {name}: notebooks vs reports"
    registered = set().union(*(files_under(load(n).notebooks_dir, "*.ipynb") for n in FAMILIES))
    assert files_under(Path("notebooks"), "*.ipynb") == registered, "a notebook outside notebooks/<family>/"


def test_every_report_has_its_caption_in_its_family_folder_and_no_caption_is_orphaned():
    for name in FAMILIES:
        family = load(name)
        expected = {str(family.report_dir / f"{report}.rst") for report in family.reports}
        assert {caption(report) for report in family.reports} == expected
        assert files_under(family.report_dir, "*.rst") == expected, f"family {name}: captions vs reports"
    assert files_under(Path("report"), "*.rst") == {caption(r) for r in REPORTS}, "a caption outside report/<family>/"


# --- the workflow builds for any set of enabled families ----------------------------------------------------


def workflow_copy(tmp_path) -> Path:
    """The workflow files copied under tmp_path/wf (with the PaSBench demo set), AURA's demo seeds linked in
    (read only by a dry run)."""
    work = copy_workflow(tmp_path / "wf")
    (work / "data" / "raw" / "demo_seeds").symlink_to(REPO / "data" / "raw" / "demo_seeds")
    return work


def snakemake(work: Path, tmp_path, families: list[str], *args: str) -> str:
    raw = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    raw["paths"] = {**raw.get("paths", {}), **{k: str(tmp_path / k) for k in
                                                  ("interim", "processed", "results", "figures", "cache", "logs")}}
    raw["families"] = families
    cfg = work / "config" / f"{'_'.join(families)}.yaml"
    cfg.write_text(yaml.safe_dump(raw))
    out = subprocess.run([sys.executable, "-m", "snakemake", *args, "--configfile", str(cfg)], cwd=work,
                         capture_output=True, text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(REPO / "src")})
    assert out.returncode == 0, (out.stdout + out.stderr)[-3000:]
    return out.stdout + out.stderr


def job_counts(text: str) -> dict[str, int]:
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\w+)\s+(\d+)$", text, re.MULTILINE)}


def rule_names(text: str) -> set[str]:
    return {line.strip() for line in text.splitlines() if re.fullmatch(r"\w+", line.strip())}


def test_each_family_alone_and_all_together_build_the_dag(tmp_path):
    work = workflow_copy(tmp_path)
    alone = [(name,) for name in FAMILIES]
    rules = {fams: rule_names(snakemake(work, tmp_path, list(fams), "--list-rules")) for fams in alone}
    # each family brings its own rules, the render rules of its reports among them; only `all` is common
    for fams in alone:
        assert {f"render_{r}" for r in load(fams[0]).reports} <= rules[fams], fams
        for other in alone:
            if other != fams:
                assert rules[fams] & rules[other] == {"all"}, (fams, other)
    assert {"rollout", "judge", "panel", "select_seeds"} <= rules[("aura",)]

    every = tuple(FAMILIES)
    jobs = {fams: job_counts(snakemake(work, tmp_path, list(fams), "-n", "all", "--quiet", "rules"))
            for fams in [*alone, every]}
    assert jobs[("aura",)]["rollout"] == 1 and jobs[("aura",)]["render_unsafe_rates"] == 1  # the default run's
    for fams in alone:  # a family alone runs none of the others' jobs
        assert set(jobs[fams]) - {"all", "total"} <= rules[fams], fams
    # all enabled = the DAGs side by side: every job count is the sum of the families' alone, `all` once
    expected: dict[str, int] = {}
    for fams in alone:
        for name, count in jobs[fams].items():
            if name not in ("all", "total"):
                expected[name] = expected.get(name, 0) + count
    assert {k: v for k, v in jobs[every].items() if k not in ("all", "total")} == expected
