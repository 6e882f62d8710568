"""config/open-weights.yaml: AURA's pipeline with every role on an open-weight model behind the user's own vLLM
server: no role on a paid endpoint, no key needed, no batch, its own output folders, and its DAG plans.
(Its params meet the vLLM profile end to end: tests/core/test_provider_profiles.py, shipped configs.)"""
from __future__ import annotations

import shutil
import subprocess
import sys

from aura.config import load_config
from aura.estimate import estimate
from conftest import REPO, copy_workflow

CONFIG = REPO / "config" / "open-weights.yaml"


def role_models(raw) -> set[str]:
    roles = raw["aura"]["roles"]
    return {m for v in roles.values() for m in (v if isinstance(v, list) else [v]) if m}


def test_every_role_is_an_open_weight_model_on_the_vllm_endpoint():
    config = load_config(CONFIG)
    used = role_models(config.raw) | {m for k in ("format_models", "vendor_overlap_models", "consistency_models",
                                                  "validation_models") for m in config.raw["aura"]["evaluate"][k]}
    for name in used:
        ep = config.endpoints[config.models[name].endpoint]
        assert (ep.name, ep.api_key_env, ep.provider) == ("vllm", None, "vllm"), name
    assert config.raw["families"] == ["aura"] and config.raw["llm"]["batch"]["roles"] == []
    paper = load_config(REPO / "config" / "paper.yaml")
    assert all(config.paths[k] != paper.paths[k] for k in ("interim", "processed", "results", "figures", "logs"))
    judges = config.raw["aura"]["roles"]["judges"]
    assert len({config.models[j].vendor for j in judges}) == 3  # three vendors, as the paper's panel
    replacement = config.models[config.raw["aura"]["roles"]["replacement_judge"]]
    assert replacement.vendor not in {config.models[j].vendor for j in judges}


def test_its_estimate_costs_nothing_and_its_dag_plans(tmp_path):
    lines = estimate(load_config(CONFIG))
    assert lines and sum(ln.calls for ln in lines) > 100_000 and sum(ln.cost_usd for ln in lines) == 0.0
    work = copy_workflow(tmp_path / "wf")
    for name in ("paper.yaml", "open-weights.yaml"):
        shutil.copy2(REPO / "config" / name, work / "config" / name)
    out = subprocess.run([sys.executable, "-m", "snakemake", "all", "-n", "--quiet", "rules", "--cores", "2",
                          "--configfile", "config/open-weights.yaml"], cwd=work, capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, (out.stdout + out.stderr)[-3000:]
    assert "rollout" in out.stdout and "pasbench" not in out.stdout
