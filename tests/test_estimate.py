"""`aura estimate` spends nothing and excludes cache hits."""
from __future__ import annotations

import yaml

from aura.cli import main
from aura.config import validate_config
from aura.estimate import estimate
from aura.io import write_jsonl
from conftest import REPO, base_config


def _config(server, tmp_path):
    raw = base_config(server.base_url, tmp_path / "cache")
    raw["paths"]["seeds"] = str(REPO / "data/raw/demo_seeds")
    raw["models"]["m"]["price"] = {"input_per_mtok": 10.0, "output_per_mtok": 30.0}
    return raw


def test_projected_without_inputs_and_no_request(server, tmp_path, capsys):
    raw = _config(server, tmp_path)
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(raw))
    assert main(["estimate", "--configfile", str(path)]) == 0
    text = capsys.readouterr().out
    assert "rollout" in text and "projected" in text and "TOTAL" in text
    lines = estimate(validate_config(raw))
    roll = next(ln for ln in lines if ln.stage == "rollout")
    assert roll.calls == round(10 * 7.955) and roll.cost_usd > 0
    assert server.stats()["count"] == 0


def test_exact_when_dataset_exists_and_cache_hits_excluded(server, tmp_path):
    from aura.evaluate.rollout import requests_for
    from aura.llm import LLMClient
    from aura.pipeline.layout import PROMPTS_DIR, layout
    from aura.prompts import load_prompt

    raw = _config(server, tmp_path)
    cfg = validate_config(raw)
    items = [{"item_id": f"it{i}", "profile": "You are an agent.", "model_input": f"[USER] task {i}"} for i in range(6)]
    write_jsonl(layout(cfg.raw)["dataset"], items)
    roll = next(ln for ln in estimate(cfg) if ln.stage == "rollout")
    assert (roll.basis, roll.calls, roll.cached) == ("exact", 6, 0)
    prompt = load_prompt(PROMPTS_DIR / "evaluate" / "rollout_react.v1.md")
    with LLMClient(cfg) as llm:
        llm.run("evaluated", "m", requests_for(items[:4], prompt))
    roll = next(ln for ln in estimate(cfg) if ln.stage == "rollout")
    assert (roll.calls, roll.cached) == (2, 4)
    assert server.stats()["count"] == 4  # only the 4 real calls; estimating sent nothing
