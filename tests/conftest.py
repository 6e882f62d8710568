"""Shared fixtures: a fake OpenAI-compatible server and configs that point at it."""
from __future__ import annotations

import copy
import os
from collections import Counter
import shutil
import sys
from pathlib import Path

import pytest

from aura.config import validate_config
from aura.quick_exit import skip_final_collections
from aura.simulator.server import FakeOpenAIServer

REPO = Path(__file__).resolve().parents[1]
# A few tests reuse another group's test helpers (`from test_families import workflow_copy`): every group's
# folder is importable, whichever files a run collects (test file names are unique across the groups).
sys.path[:0] = [str(Path(__file__).parent / group) for group in ("core", "aura", "pasbench", "lpsbench")
                if str(Path(__file__).parent / group) not in sys.path]


# The suite runs on pytest-xdist workers (pyproject: `-n auto --dist loadscope --no-loadscope-reorder`), one per
# core and one more (`pytest_xdist_auto_num_workers`): a worker is often idle, waiting on a subprocess, a cluster's
# queue or a fake server's delay, and the extra one fills those waits (with 4 workers on 2 cores, timing-bound tests
# went flaky under load: docs/measurements.md has both). Each test module goes whole to one worker, so its
# module-scoped fixtures (a workflow run read by many tests) are built once. Modules are handed out as xdist itself
# would (most tests first), except the two modules whose single tests take minutes, which go first: the SLURM module
# (three tests, but minutes waiting on its cluster's queue) and the wheel's install into a fresh venv. Handed out
# late, the SLURM module ran alone at the end while the other workers idled (measured), and the wheel's minutes
# would do the same. (Handing out every long module first was slower on 2 cores: the workflow runs then all compete
# for the cores at once. Both measured: docs/measurements.md.)
FIRST = ("core/test_slurm.py", "core/test_inspect_wheel.py")
skip_final_collections()  # a worker exits without walking its heap (every module the suite imported) twice more


def pytest_xdist_auto_num_workers(config):
    return len(os.sched_getaffinity(0)) + 1


def pytest_collection_modifyitems(items):
    root = Path(__file__).parent
    modules = [Path(str(item.fspath)).relative_to(root).as_posix() for item in items]
    count = Counter(modules)
    rank = {m: i for i, m in enumerate(FIRST)}
    order = {id(item): (rank.get(m, len(FIRST)), -count[m]) for item, m in zip(items, modules)}
    items.sort(key=lambda item: order[id(item)])  # stable: collection order among equals and within a module


@pytest.fixture(scope="session")
def fake():
    with FakeOpenAIServer() as srv:
        yield srv


@pytest.fixture
def server(fake):
    fake.reset()
    yield fake
    fake.reset()


# The judge panel and the reviewers of every test config: three distinct models (the schema requires it).
JUDGE_MODEL_IDS = {"jb": "judge-b", "jc": "judge-c"}
PANEL = ["m", *JUDGE_MODEL_IDS]


def base_config(url: str, cache_dir: Path, **endpoint) -> dict:
    ep = {"kind": "openai", "base_url": url, "api_key_env": None, "structured_output": "json_schema",
          "max_concurrency": 4, "max_tries": 3, "backoff_base_s": 0.01, "backoff_max_s": 0.05, "timeout_s": 5}
    ep.update(endpoint)
    return {
        "paths": {"cache": str(cache_dir), "interim": str(cache_dir.parent / "interim"),
                  "processed": str(cache_dir.parent / "processed"), "results": str(cache_dir.parent / "results"),
                  "logs": str(cache_dir.parent / "logs"), "figures": str(cache_dir.parent / "figures")},
        "endpoints": {"fake": ep},
        "models": {"m": {"endpoint": "fake", "model_id": "fake-model",
                         "params": {"temperature": 0.0, "max_tokens": 64, "seed": 1},
                         "price": {"input_per_mtok": 1.0, "output_per_mtok": 2.0}},
                   # two more panel members: distinct model ids, so the fake server can answer each its
                   # own way (scripted.disagreeing_judges); by default every model gets the same answers
                   **{name: {"endpoint": "fake", "model_id": model_id,
                             "params": {"temperature": 0.0, "max_tokens": 64, "seed": 1},
                             "price": {"input_per_mtok": 1.0, "output_per_mtok": 2.0}}
                      for name, model_id in JUDGE_MODEL_IDS.items()}},
        # the AURA family's section: its roles (the only part without defaults)
        "aura": {"roles": {"generator": "m", "classifier": "m", "reviewers": list(PANEL), "judges": list(PANEL),
                           "evaluated": ["m"]}},
    }


def available_again(raw: dict, *models: str, family: str = "pasbench") -> dict:
    """A copy of a paper config's raw dict with `models` made available again: each one's `unavailable` mark popped
    and the model added to `<family>.evaluated`, so a test still reaches the param logic of a model its provider
    has since retired (o1, o1-mini, Gemini 2.5: the reasoning / thinking rules stay tested)."""
    raw = copy.deepcopy(raw)
    for name in models:
        raw["models"][name].pop("unavailable", None)
        if name not in raw[family]["evaluated"]:
            raw[family]["evaluated"].append(name)
    return raw


def load_available(path: str | Path, *models: str, overrides: dict | None = None, family: str = "pasbench"):
    """`aura.config.load_config(path, overrides)` on that config with `models` made available again."""
    from aura.config import DEFAULT_SCHEMA, _deep_merge, read_raw

    raw = available_again(read_raw(path), *models, family=family)
    if overrides:
        raw = _deep_merge(raw, overrides)
    schema = Path(path).parent / "schema.yaml"
    return validate_config(raw, schema if schema.exists() else DEFAULT_SCHEMA, source=str(path))


@pytest.fixture
def make_config(server, tmp_path):
    def make(raw_overrides=None, **endpoint):
        raw = base_config(server.base_url, tmp_path / "cache", **endpoint)
        for key, value in (raw_overrides or {}).items():
            raw[key] = copy.deepcopy(value)
        return validate_config(raw)

    return make


def workflow_files() -> list[str]:
    """What a copy of the workflow needs, relative to the repository: the Snakefile and its workflow profile, the
    shared schema and LLM-layer prompts, and each family's folders (rules, prompts, notebooks, captions, demo data)
    that lie in this repository (a family installed from elsewhere carries its own)."""
    from aura.families import all_families

    files = ["Snakefile", "profiles", "config/schema.yaml", "prompts/llm"]
    for family in all_families():
        for folder in (family.rules_dir, family.prompts_dir, family.notebooks_dir, family.report_dir,
                       *family.demo_data):
            if Path(folder).is_relative_to(REPO) and Path(folder).exists():
                files.append(str(Path(folder).relative_to(REPO)))
    return files


def printed_lines(out) -> list[str]:
    """The non-blank lines a Snakemake run printed (stdout, then stderr), less Snakemake's own banner naming the
    workflow profile it read (`profiles/default`, read by every run of the workflow)."""
    return [ln for ln in (out.stdout + out.stderr).splitlines()
            if ln.strip() and not ln.startswith("Using workflow specific profile")]


def rebuilt_outputs(workdir: Path, folders) -> dict[str, object]:
    """Every file under ``workdir/<folder>``: its bytes, or for a provenance sidecar its JSON without the `run`
    field (time, host, folder, process), which is what two builds of one output must agree on."""
    import json

    from aura.provenance import without_run

    out = {}
    for folder in folders:
        for path in sorted((Path(workdir) / folder).rglob("*")):
            if path.is_file():
                name = str(path.relative_to(workdir))
                out[name] = without_run(json.loads(path.read_text())) if name.endswith(".prov.json") else path.read_bytes()
    return out


def copy_workflow(dst: Path) -> Path:
    """The files a Snakemake run needs, copied under `dst` (Snakemake tracks their mtimes, so tests that
    run the workflow work on a copy and never touch the repository's)."""
    for item in workflow_files():
        src, target = REPO / item, dst / item
        target.parent.mkdir(parents=True, exist_ok=True)
        (shutil.copytree if src.is_dir() else shutil.copy2)(src, target)
    return dst
