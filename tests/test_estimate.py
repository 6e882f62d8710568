"""`aura estimate` spends nothing and excludes cache hits."""
from __future__ import annotations

import pytest
import yaml

from aura.cli import main
from aura.config import validate_config
from aura.estimate import estimate
from aura.io import write_jsonl
from conftest import base_config
from rjudge_fixture import write_paper_shaped


def _config(server, tmp_path):
    """Seeds written here: 10 unintended (Program 4 unsafe + 2 safe, IoT 3 + 1) and 5 injection (Web)."""
    raw = base_config(server.base_url, tmp_path / "cache")
    seeds = write_paper_shaped(tmp_path / "seeds", unintended={"Program": (4, 2), "IoT": (3, 1)}, injection={"Web": 5})
    raw["paths"]["seeds"] = str(seeds)
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
    assert roll.calls == round(10 * 7.955)
    # cost follows the price table exactly: $10 per M input tokens, $30 per M output tokens
    assert roll.cost_usd == pytest.approx(roll.tokens_in * 10.0 / 1e6 + roll.tokens_out * 30.0 / 1e6, rel=1e-12)
    assert roll.tokens_in > 0 and roll.tokens_out == roll.calls * 64  # max_tokens 64 caps each projected answer
    assert server.stats()["count"] == 0


def test_exact_when_dataset_exists_and_cache_hits_excluded(server, tmp_path):
    from aura.families.aura.evaluate.rollout import requests_for
    from aura.llm import LLMClient
    from aura.pipeline.layout import layout
    from aura.prompts import get_prompt

    raw = _config(server, tmp_path)
    cfg = validate_config(raw)
    items = [{"item_id": f"it{i}", "profile": "You are an agent.", "model_input": f"[USER] task {i}"} for i in range(6)]
    write_jsonl(layout(cfg.raw)["dataset"], items)
    roll = next(ln for ln in estimate(cfg) if ln.stage == "rollout")
    assert (roll.basis, roll.calls, roll.cached) == ("exact", 6, 0)
    prompt = get_prompt("rollout_react")
    with LLMClient(cfg) as llm:
        llm.run("evaluated", "m", requests_for(items[:4], prompt))
    roll = next(ln for ln in estimate(cfg) if ln.stage == "rollout")
    assert (roll.calls, roll.cached) == (2, 4)
    assert server.stats()["count"] == 4  # only the 4 real calls; estimating sent nothing


# --- where the seed count comes from: read, projected explicitly, or an error -----------------------

def _run_estimate(raw, tmp_path, capsys):
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(raw))
    code = main(["estimate", "--configfile", str(path)])
    return code, capsys.readouterr().out


def test_seed_count_read_from_the_folder_is_stated(server, tmp_path, capsys):
    raw = _config(server, tmp_path)  # 10 unintended of 15 records
    code, text = _run_estimate(raw, tmp_path, capsys)
    assert code == 0
    assert text.splitlines()[0] == f"seeds: 10 unintended records read from {tmp_path / 'seeds'}"


def test_seed_count_before_the_download_is_projected_explicitly(server, tmp_path, capsys):
    raw = _config(server, tmp_path)
    raw["seed_download"] = {"url": "http://127.0.0.1:9/pin.tar.gz", "dest": str(tmp_path / "rjudge"),
                            "lock": str(tmp_path / "lock.json")}
    raw["seed_counts"] = {"unintended": 157}
    code, text = _run_estimate(raw, tmp_path, capsys)
    assert code == 0
    assert text.splitlines()[0] == (f"projected from 157 seeds (seed_counts.unintended): {tmp_path / 'rjudge'} "
                                    "is not downloaded yet (rule fetch_seeds)")
    # rollouts projected from the seeds: round(157 x 7.955 items per seed) = round(1248.9) = 1249 (the paper's rows)
    roll = next(ln for ln in estimate(validate_config(raw)) if ln.stage == "rollout")
    assert (roll.basis, roll.calls) == ("projected", 1249)
    raw.pop("seed_counts")  # without expected counts: estimate.seeds (default 10), still said so
    code, text = _run_estimate(raw, tmp_path, capsys)
    assert text.splitlines()[0].startswith("projected from 10 seeds (estimate.seeds): ")
    assert server.stats()["count"] == 0


def test_missing_seeds_without_a_download_is_an_error(server, tmp_path):
    raw = _config(server, tmp_path)
    raw["paths"]["seeds"] = str(tmp_path / "nowhere")
    with pytest.raises(SystemExit) as ei:
        estimate(validate_config(raw))
    msg = str(ei.value.code)
    assert msg.startswith(f"estimate: seed folder {tmp_path / 'nowhere'} does not exist") and "\n" not in msg


def test_unreadable_seeds_are_an_error_not_a_fallback(server, tmp_path):
    raw = _config(server, tmp_path)
    (tmp_path / "seeds" / "IoT" / "broken.json").write_text("{not json")  # beside the good files
    with pytest.raises(SystemExit) as ei:
        estimate(validate_config(raw))
    assert "estimate: cannot read the seeds in" in str(ei.value.code) and "broken.json" in str(ei.value.code)


# --- live vs batch vs prefix-cached cost ----------------------------------------------------------------

def test_batch_and_cached_views_follow_the_price_table(server, tmp_path, capsys):
    from aura.estimate import static_prefix_tokens

    raw = _config(server, tmp_path)
    raw["endpoints"]["fake"]["batch"] = True
    raw["models"]["m"]["price"] = {"input_per_mtok": 10.0, "output_per_mtok": 30.0, "cached_input": 1.0,
                                   "batch_discount": 0.5}
    raw["estimate"] = {"prefix_cache_hit_share": 0.5, "prefix_cache_min_tokens": 0}
    lines = estimate(validate_config(raw))
    # the judge prompts' text before their first variable: 2998, 2801 and 3063 characters (judge_*.v2.md),
    # i.e. 749, 700 and 765 tokens at 4 characters a token; a projected judge line covers the 3 axes: mean 738
    assert [static_prefix_tokens(f"judge_{a}") for a in ("detection", "action_type", "safety")] == [749, 700, 765]
    judge = next(ln for ln in lines if ln.stage == "judge (m)" and ln.model == "m")
    # cached: half of 738 = 369 tokens a call at $1 instead of $10 per 1M: $9 x 369 x calls / 1e6 saved
    assert judge.cached_usd == pytest.approx(judge.cost_usd - 9.0 * 369 * judge.calls / 1e6, rel=1e-12)
    # batch (judge is a role the Batch API takes, endpoint batch: true): half price; both: the cached cost halved
    assert judge.batch_usd == pytest.approx(judge.cost_usd / 2) and judge.both_usd == pytest.approx(judge.cached_usd / 2)
    roll = next(ln for ln in lines if ln.stage == "rollout")
    assert roll.batch_usd == roll.cost_usd  # rollouts are never batched
    code, out = _run_estimate(raw, tmp_path, capsys)
    assert code == 0 and "batch_usd" in out and "prefix_cache_hit_share" in out
    total = next(row for row in out.splitlines() if row.startswith("TOTAL")).split()
    # TOTAL calls cached tokens_in tokens_out live batch cached batch+cached
    assert float(total[-3]) == pytest.approx(sum(ln.batch_usd for ln in lines), abs=1e-4)
    assert float(total[-4]) == pytest.approx(sum(ln.cost_usd for ln in lines), abs=1e-4)


def test_short_prefixes_and_endpoints_without_batch_get_no_discount(server, tmp_path):
    raw = _config(server, tmp_path)  # endpoint batch: false (default), no cached_input price
    raw["estimate"] = {"prefix_cache_min_tokens": 1024}  # every judge prefix (700-765 tokens) is shorter
    lines = estimate(validate_config(raw))
    assert all(ln.batch_usd == ln.cached_usd == ln.both_usd == ln.cost_usd for ln in lines)
