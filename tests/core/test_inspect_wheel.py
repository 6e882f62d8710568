"""The Inspect tasks as a user installs them: each task module imports Inspect, datasets and the request builders,
not the workflow's stack; the wheel carries the repository's prompts/ and config/ (aura.resources); and, opt-in
(AURA_WHEEL_TEST=1, set by .ci/run: a fresh venv's install takes minutes), the wheel installed into a fresh
venv with the tasks' dependencies alone (no extra: no workflow, engine or test tools), nothing of the repository
on its path, runs each task with --limit 2 from an export folder against the fake server."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from conftest import REPO
from test_lpsbench_stages import lps  # noqa: F401 - the fixture: a config and cases on the fake server

pytest.importorskip("inspect_ai")

TASK_MODULES = ("aura.families.aura.inspect_task", "aura.families.pasbench.inspect_task",
                "aura.families.lpsbench.inspect_task")
WORKFLOW_STACK = ("snakemake", "papermill", "langchain", "langchain_core", "mcp")
# What the tasks' install (`pip install aura-eval`, no extra) leaves out: the workflow, the embedded engine, the
# cluster plugins and the test tools are extras (pyproject.toml).
EXTRAS_ONLY = ("snakemake", "papermill", "matplotlib", "langchain", "krippendorff", "mlcroissant", "xllamacpp",
               "snakemake_executor_plugin_slurm", "pytest", "selenium")
TREE = ("src", "prompts", "config", "pyproject.toml", "setup.py", "MANIFEST.in", "README.md", "LICENSE")


@pytest.mark.parametrize("module", TASK_MODULES)
def test_a_task_module_imports_inspect_not_the_workflow_stack(module):
    code = (f"import sys, {module}\n"
            f"stack = sorted(m for m in sys.modules if m.split('.')[0] in {WORKFLOW_STACK!r})\n"
            "assert 'inspect_ai' in sys.modules and not stack, stack")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=300)


def tracked(folder: str) -> set[str]:
    out = subprocess.run(["git", "ls-files", folder], cwd=REPO, capture_output=True, text=True, check=True)
    return set(out.stdout.split())


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The project's wheel, built by pip from a copy of the source tree (no build/ left in the checkout)."""
    tmp = tmp_path_factory.mktemp("wheel")
    tree = tmp / "tree"
    tree.mkdir()
    for name in TREE:
        if (REPO / name).is_dir():
            shutil.copytree(REPO / name, tree / name, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        else:
            shutil.copy2(REPO / name, tree / name)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet",
                    "--wheel-dir", str(tmp / "dist"), str(tree)], check=True, timeout=600)
    (found,) = (tmp / "dist").glob("aura_eval-*.whl")
    return found


def test_the_wheel_carries_the_repositorys_prompts_and_configs(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    for folder in ("prompts", "config"):
        files = tracked(folder)
        assert files and {f"aura/_resources/{f}" for f in files} <= names, folder
    assert "aura/resources.py" in names and "aura/inspect_dataset.py" in names


def exports(tmp: Path, lps) -> dict[str, Path]:
    """An export folder per family, written as `aura export-dataset` writes the splits."""
    import pandas as pd

    from aura.export_dataset import Split
    from aura.export_dataset.parquet import write_split
    from aura.families.lpsbench.dataset_export import COLUMNS, flat
    from aura.families.pasbench.dataset_export import IMAGE_COLUMNS, TEXT_COLUMNS
    from aura.io import read_jsonl
    from test_inspect_aura import rows as aura_rows
    from test_inspect_pasbench import items

    export = tmp / "export"
    (export / "aura").mkdir(parents=True)
    pd.DataFrame([{**{k: v for k, v in r.items() if k != "steps"}, "steps_json": json.dumps(r["steps"])}
                  for r in aura_rows()]).to_parquet(export / "aura" / "test.parquet")
    pas = [{**it, "index": i, "condition": "at home", "source": "demo"} for i, it in enumerate(items(tmp))]
    for modality, columns in (("text", TEXT_COLUMNS), ("image", IMAGE_COLUMNS)):
        write_split(export, f"pasbench_{modality}", columns,
                    Split("test", "items.jsonl", [r for r in pas if r["modality"] == modality]))
    cases = lps.cases()
    write_split(export, "lpsbench", COLUMNS, Split("test", str(cases), [flat(r) for r in read_jsonl(cases)]))
    return export


def has_uv() -> bool:
    return subprocess.run([sys.executable, "-m", "uv", "--version"], capture_output=True).returncode == 0


def install_command(python: Path, wheel: Path, uv: bool) -> list[str]:
    """The install of the wheel and its dependencies (the tasks' alone: no extra) from the registry into the fresh
    venv, at the versions constraints.txt pins (the bootstrap's, so the resolver does not search): uv's where this
    environment has it
    (the bootstrap installs it: the packages fetched and unpacked in parallel, no bytecode compiled), else pip's,
    as a user types it."""
    pins = ["-c", str(REPO / "constraints.txt")]
    if uv:
        return [sys.executable, "-m", "uv", "pip", "install", "--quiet", "--python", str(python), str(wheel), *pins]
    return [str(python), "-m", "pip", "install", "--quiet", str(wheel), *pins]


@pytest.mark.skipif(os.environ.get("AURA_WHEEL_TEST") != "1",
                    reason="opt-in (AURA_WHEEL_TEST=1, set by .ci/run): installs the wheel into a fresh venv")
def test_the_installed_wheel_runs_each_task_from_an_export(wheel, server, lps, tmp_path):
    from inspect_ai.log import read_eval_log

    from aura.prompts import get_prompt
    from test_inspect_aura import JUDGE_IDS, rules as aura_rules
    from test_inspect_lpsbench import RULES as LPS_RULES
    from test_inspect_pasbench import RULES as PAS_RULES

    venv = tmp_path / "venv"
    uv = has_uv()  # uv installs from outside the venv: no pip in it then (ensurepip: 4.7 s of CPU)
    subprocess.run([sys.executable, "-m", "venv", *(["--without-pip"] if uv else []), str(venv)], check=True,
                   timeout=300)
    python = venv / "bin" / "python"
    subprocess.run(install_command(python, wheel, uv), check=True, timeout=1800)
    # A user's Python writes bytecode: where this environment says not to (CI does), every `inspect eval` below
    # compiled the fresh venv's modules from source again (`inspect eval --help` 4.7 s -> 2.1 s CPU once written).
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONDONTWRITEBYTECODE")}
    env.update(FAKE_BASE_URL=server.base_url, FAKE_API_KEY="not-a-key", PATH=f"{venv / 'bin'}:{env['PATH']}")
    where = subprocess.run([str(python), "-c", "import aura.resources as r, sys; print(r.ROOT); print(sys.path)"],
                           cwd=tmp_path, env=env, capture_output=True, text=True, check=True)
    root = where.stdout.splitlines()[0]
    assert root.startswith(str(venv)) and root.endswith("aura/_resources"), where.stdout
    assert str(REPO) not in where.stdout  # nothing of the repository on the path
    extras = subprocess.run([str(python), "-c", "import importlib.util as u; "
                             f"print([m for m in {EXTRAS_ONLY!r} if u.find_spec(m)])"],
                            cwd=tmp_path, env=env, capture_output=True, text=True, check=True)
    assert extras.stdout.strip() == "[]", extras.stdout  # the tasks run on the tasks' install alone

    export = exports(tmp_path, lps)
    runs = {
        "aura/aura_eval": (aura_rules(), [f"--model-role=judge_{i + 1}=openai-api/fake/{m}"
                                          for i, m in enumerate(JUDGE_IDS)]),
        "aura/pasbench": (PAS_RULES, ["--model-role=judge=openai-api/fake/judge-b", "-T", "samples=2"]),
        "aura/lpsbench": (LPS_RULES, ["--model-role=evaluator=openai-api/fake/eval-model",
                                      "-T", f"config={lps.config()}"]),
    }
    for task, (rules, options) in runs.items():
        server.reset()
        server.set_rules(rules)
        logs = tmp_path / "logs" / task.split("/")[1]
        out = subprocess.run([str(venv / "bin" / "inspect"), "eval", task, "--model", "openai-api/fake/fake-model",
                              "-T", f"data={export}", "--limit", "2", "--log-dir", str(logs), "--display", "none",
                              *options], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
        assert out.returncode == 0, (task, out.stdout[-3000:], out.stderr[-3000:])
        (path,) = logs.glob("*.eval")
        log = read_eval_log(str(path))
        assert log.status == "success" and len(log.samples) == 2 * (2 if task == "aura/pasbench" else 1), task
        for name, record in log.eval.metadata["prompts"].items():  # the wheel's copy of the repository's prompts
            assert record["sha256"] == get_prompt(name).sha256 and record["file"].startswith("prompts/"), name
