"""Benchmark families: each family hands the core its files through its manifest (rules, prompts, notebooks,
report captions under <root>/<kind>/<name>/), names are unique across families, and the workflow builds its
DAG for each family alone and for all of them."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from aura.config import ConfigError, config_schema, validate_config
from aura.families import (Family, Stage, all_families, enabled, family_of_prompt, family_of_report, load, merged,
                           names)
from aura.pipeline.layout import SHARED, layout
from aura.pipeline.registry import STAGES
from aura.pipeline.rules_support import REPORTS, caption
from aura.prompts import SHARED_DIR, prompt_file, versions
from conftest import REPO, base_config, copy_workflow

FAMILIES = names()  # the registered families (the built-in three first, then any installed plugin)
BUILT_IN = ["aura", "pasbench", "lpsbench"]  # the families whose files this repository carries (root = REPO)


def raw_config(tmp_path, **extra) -> dict:
    return {**base_config("http://127.0.0.1:9/v1", tmp_path / "cache"), **extra}


def rel(path: Path) -> str:
    """A path as rules name it: relative to the repository when it lies inside, else absolute."""
    path = Path(path)
    return str(path.relative_to(REPO)) if path.is_relative_to(REPO) else str(path)


def files_under(folder: Path, pattern: str) -> set[str]:
    """The files matching `pattern` anywhere under `folder` (relative to the repository or absolute), as `rel`."""
    return {rel(p) for p in (REPO / folder).rglob(pattern)}


# --- the registry ---------------------------------------------------------------------------------------


def test_the_built_in_families_are_registered_first_in_their_order():
    assert FAMILIES[:3] == BUILT_IN
    assert [f.name for f in all_families()] == FAMILIES


def test_every_registered_family_loads_under_its_own_name_with_its_folders_under_its_root():
    for name in FAMILIES:
        family = load(name)
        assert isinstance(family, Family) and family.name == name and family.title
        root = Path(family.root)
        assert root.is_absolute(), name
        expected = [root / kind / name if family.nested else root / kind
                    for kind in ("rules", "prompts", "notebooks", "report")]
        assert [family.rules_dir, family.prompts_dir, family.notebooks_dir, family.report_dir] == expected
    for name in BUILT_IN:  # the built-in families: the repository's folders
        family = load(name)
        assert (family.rules_dir, family.prompts_dir, family.notebooks_dir, family.report_dir) == (
            REPO / "rules" / name, REPO / "prompts" / name, REPO / "notebooks" / name, REPO / "report" / name)


def test_a_plugin_family_carries_its_files_in_its_own_folder(tmp_path):
    plugin = Family(name="demo", title="demo", stages={}, layout=lambda raw: {}, reports={"demo_fig": {
        "notebook": "fig.ipynb", "inputs": []}}, targets=lambda c: [], root=tmp_path, nested=False,
        prompts={"ask": ("", 2), "data": ("sub", 1)}, data_prompts=frozenset({"data"}))
    assert plugin.rules_dir == tmp_path / "rules" and plugin.report_dir == tmp_path / "report"
    assert plugin.notebook("demo_fig") == tmp_path / "notebooks" / "fig.ipynb"
    assert plugin.caption("demo_fig") == tmp_path / "report" / "demo_fig.rst"
    assert plugin.prompt_path("ask") == tmp_path / "prompts" / "ask.v2.md"
    assert plugin.prompt_path("data") == tmp_path / "prompts" / "sub" / "data.v1.yaml"


def test_the_schema_holds_every_registered_family_section():
    """config/schema.yaml has the shared keys only; the composed schema adds each family's section as its
    manifest gives it, and the folders a family adds to `paths`."""
    shared = yaml.safe_load((REPO / "config" / "schema.yaml").read_text())
    assert not set(FAMILIES) & set(shared["properties"]), "a family section in the shared schema"
    schema = config_schema()
    for family in all_families():
        assert schema["properties"][family.name] == family.schema, family.name
        for key, prop in family.paths_schema.items():
            assert schema["properties"]["paths"]["properties"][key] == prop, (family.name, key)
    assert set(schema["properties"]) == set(shared["properties"]) | set(FAMILIES)


def test_enabled_families_follow_the_config_in_its_order(tmp_path):
    default = validate_config(raw_config(tmp_path)).raw
    assert default["families"] == FAMILIES and [f.name for f in enabled(default)] == FAMILIES  # default: every one
    only = validate_config(raw_config(tmp_path, families=["pasbench"])).raw
    assert [f.name for f in enabled(only)] == ["pasbench"]
    both = validate_config(raw_config(tmp_path, families=["pasbench", "aura"])).raw
    assert [f.name for f in enabled(both)] == ["pasbench", "aura"]


@pytest.mark.parametrize("families, message", [
    (["aura", "nope"], "families: nope not registered (registered: "),
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
    assert str(err.value).startswith(f"unknown family 'nope' (registered: {', '.join(FAMILIES)}; ")


# --- merged views: stages, layout, reports, prompts ------------------------------------------------------


def test_stage_names_layout_keys_reports_and_prompts_are_unique_across_families(tmp_path):
    raw = validate_config(raw_config(tmp_path)).raw
    families = all_families()
    # the merged views hold every family's entries, none lost to a shared name
    assert len(STAGES) == sum(len(f.stages) for f in families)
    assert len(layout(raw)) == sum(len(f.layout(raw)) for f in families) + len(SHARED)  # + the report folders
    assert len(REPORTS) == sum(len(f.reports) for f in families)
    assert len(versions()) == sum(len(f.prompts) for f in families)
    for f in families:
        assert all(family_of_report(r) is f for r in f.reports), f.name
        assert all(family_of_prompt(p) is f for p in f.prompts), f.name
    # the AURA core keeps its names; every other family prefixes its own (contract of issue 10)
    for f in families:
        if f.name == "aura":
            continue
        assert all(s.startswith(f"{f.name}-") for s in f.stages), f.name
        assert all(k.startswith(f"{f.name}_") for k in f.layout(raw)), f.name
        assert all(r.startswith(f"{f.name}_") for r in f.reports), f.name


def test_a_name_two_families_share_is_an_error_naming_both(tmp_path):
    def fam(name, stages):
        return Family(name=name, title=name, stages=stages, layout=lambda raw: {}, reports={}, targets=lambda c: [],
                      root=tmp_path)

    E = "aura.families.aura.evaluate"
    one = fam("one", {"go": Stage("first", f"{E}.rollout:run")})
    two = fam("two", {"go": Stage("second", f"{E}.judge:run"), "stop": Stage("x", f"{E}.panel:run")})
    with pytest.raises(ValueError, match="stage 'go' is defined by both family 'one' and 'two'"):
        merged("stage", lambda f: f.stages, [one, two])
    # without the clash the merge keeps every entry: 1 + 1 = 2 stages
    assert list(merged("stage", lambda f: f.stages, [one, fam("two", {"stop": Stage("x", f"{E}.panel:run")})])) \
        == ["go", "stop"]


def test_every_stage_names_an_importable_function_and_manifests_import_nothing_heavy():
    for name, stage in STAGES.items():
        assert callable(stage.entry()), name
    for family in all_families():  # the estimate / viewer / command hooks name their objects the same way
        for target in (family.estimate, family.viewer, *family.commands.values()):
            if target is not None:
                assert re.fullmatch(r"[\w.]+:\w+", target), (family.name, target)
    # a manifest does not import its stages' modules: a fresh interpreter loading every family has no pandas
    code = ("import sys, aura.families as F, aura.pipeline.registry; F.all_families(); "
            "print(sorted({'pandas', 'scipy', 'openai'} & set(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "[]", out.stdout + out.stderr[-2000:]


def test_every_stage_option_has_a_check():
    for name, stage in STAGES.items():
        for key, check in stage.options.items():
            assert callable(check), (name, key)
    assert STAGES["rollout"].options["format"]("react") is None
    assert STAGES["rollout"].options["format"]("json")  # what is wrong with it


def test_a_stage_target_is_module_colon_function():
    with pytest.raises(ValueError, match="target 'aura.families.aura.evaluate.rollout.run' is not "
                                         "'package.module:attribute'"):
        Stage("old dotted form", "aura.families.aura.evaluate.rollout.run")


# --- files found through each family's manifest ------------------------------------------------------------


def test_every_rules_file_lies_in_a_registered_family_folder():
    smk = files_under(Path("rules"), "*.smk")
    by_family = {name: files_under(load(name).rules_dir, "*.smk") for name in FAMILIES}
    for name, files in by_family.items():
        assert files, f"family {name}: no *.smk in {load(name).rules_dir}"
    assert smk <= set().union(*by_family.values()), "a .smk outside every family's rules folder"


def test_every_prompt_in_use_lies_under_its_family_and_every_prompt_file_is_in_use():
    in_use = versions()
    for name, path in in_use.items():
        family = family_of_prompt(name)
        assert path == family.prompt_path(name) and path.is_file(), f"{name}: {path} missing"
        assert family.prompts_dir in path.parents, f"{name}: {path} is not under {family.prompts_dir}"
        assert SHARED_DIR not in path.parents, name
        assert prompt_file(name) == rel(path)  # rules list it relative to the repository (when inside)
    for family in all_families():
        files = {p for p in family.prompts_dir.rglob("*") if p.is_file()
                 and not p.name.endswith(".ledger.yaml")}  # a prompt's ledger (aura.prompt_ledger) beside it
        mine = {family.prompt_path(name) for name in family.prompts}
        assert files == mine, f"family {family.name}: prompt files not in its manifest: {sorted(map(rel, files - mine))}"
    loose = sorted(p.name for p in (REPO / "prompts").iterdir() if p.is_file())
    assert not loose, f"prompt files directly under prompts/ (not in a family's folder or prompts/llm/): {loose}"
    homes = {load(n).prompts_dir for n in FAMILIES} | {SHARED_DIR}
    assert {p for p in (REPO / "prompts").iterdir() if p.is_dir()} <= homes, "a prompts/ folder no family owns"


def test_every_report_notebook_exists_in_its_family_and_every_notebook_belongs_to_a_report():
    for name in FAMILIES:
        family = load(name)
        used = set()
        for report in family.reports:
            path = family.notebook(report)
            assert path.parent == family.notebooks_dir and path.is_file(), f"{name}/{report}: {path}"
            used.add(rel(path))
        assert files_under(family.notebooks_dir, "*.ipynb") == used, f"family {name}: notebooks vs reports"
    registered = set().union(*(files_under(load(n).notebooks_dir, "*.ipynb") for n in FAMILIES))
    assert files_under(Path("notebooks"), "*.ipynb") <= registered, "a notebook outside every family's folder"


def test_every_report_has_its_caption_in_its_family_folder_and_no_caption_is_orphaned():
    for name in FAMILIES:
        family = load(name)
        expected = {rel(family.report_dir / f"{report}.rst") for report in family.reports}
        assert {caption(report) for report in family.reports} == expected
        assert all((REPO / c).is_file() for c in expected), name
        assert files_under(family.report_dir, "*.rst") == expected, f"family {name}: captions vs reports"
    # the repository's report/ folder holds the built-in families' captions; a plugin's lie in its own package
    in_repo = {caption(r) for r in REPORTS if (REPO / caption(r)).is_relative_to(REPO / "report")}
    assert files_under(Path("report"), "*.rst") == in_repo, "a caption no report has"


# --- the workflow builds for any set of enabled families ----------------------------------------------------


def workflow_copy(tmp_path) -> Path:
    """The workflow files copied under tmp_path/wf, with every family's demo data (the manifests' demo_data)."""
    return copy_workflow(tmp_path / "wf")


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
    """config/config.yaml configures the built-in families: each alone, and all of them together."""
    work = workflow_copy(tmp_path)
    alone = [(name,) for name in BUILT_IN]
    rules = {fams: rule_names(snakemake(work, tmp_path, list(fams), "--list-rules")) for fams in alone}
    # each family brings its own rules, the render rules of its reports among them; only the Snakefile's
    # own rules are common (`all`, and `view_site`, the static viewer of every enabled family)
    common = {"all", "view_site"}
    for fams in alone:
        assert {f"render_{r}" for r in load(fams[0]).reports} <= rules[fams], fams
        for other in alone:
            if other != fams:
                assert rules[fams] & rules[other] == common, (fams, other)
    assert {"rollout", "judge", "panel", "select_seeds"} <= rules[("aura",)]

    every = tuple(BUILT_IN)
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
    assert jobs[every]["all"] == 1
    assert jobs[every]["total"] == sum(jobs[fams]["total"] for fams in alone) - (len(alone) - 1)


def test_pyproject_registers_the_built_in_families():
    """The three built-in families are entry points of this distribution, like any plugin's."""
    import tomllib

    from aura.families import names

    points = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["entry-points"]["aura.families"]
    assert points == {name: f"aura.families.{name}:FAMILY" for name in ("aura", "pasbench", "lpsbench")}
    assert names()[:3] == ["aura", "pasbench", "lpsbench"]


@pytest.mark.parametrize("value, message", [
    ("no_such_module_for_this_test:FAMILY", "cannot be loaded: ModuleNotFoundError"),
    ("aura.families.pasbench:FAMILY", "FAMILY.name is 'pasbench'"),
    ("aura.config:REPO_ROOT", "not a Family manifest"),
])
def test_a_broken_entry_point_is_one_line(value, message):
    from importlib.metadata import EntryPoint

    from aura.families import GROUP, FamilyError, _manifest

    with pytest.raises(FamilyError) as err:
        _manifest(EntryPoint(name="broken", value=value, group=GROUP))
    assert message in str(err.value) and "\n" not in str(err.value)


def test_a_family_may_not_take_a_core_name():
    from aura.core_commands import CORE_COMMANDS
    from aura.families import CORE_KEYS

    assert {"paths", "models", "llm", "estimate"} <= CORE_KEYS and {"estimate", "view", "render", "preflight"} <= set(
        CORE_COMMANDS)
    for family in all_families():
        assert family.name not in CORE_KEYS and not (set(family.stages) | set(family.commands)) & set(CORE_COMMANDS)


def test_the_families_settings_helpers_read_their_section_through_the_core_accessor():
    """Every family's settings helper (a function named section, settings or setting) reads the family's config
    section through `aura.config.family_section` or `Config.section`, never `raw["<family>"]` / `raw.get(...)`."""
    import ast

    own = []
    for name in BUILT_IN:
        for path in sorted((REPO / "src" / "aura" / "families" / name).rglob("*.py")):
            for fn in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(fn, ast.FunctionDef) and fn.name in ("section", "settings", "setting"):
                    names = {n.value for n in ast.walk(fn) if isinstance(n, ast.Constant) and n.value == name}
                    via = {n.func.attr if isinstance(n.func, ast.Attribute) else getattr(n.func, "id", None)
                           for n in ast.walk(fn) if isinstance(n, ast.Call)}
                    own.append((rel(path), fn.name, bool(via & {"family_section", "section"}) or not names))
    assert len(own) >= 8 and [o for o in own if not o[2]] == []
