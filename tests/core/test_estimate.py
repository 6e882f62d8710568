"""`aura estimate` spends nothing and excludes cache hits."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from aura.cli import main
from aura.config import ConfigError, UserError, validate_config
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
    raw["aura"]["seed_download"] = {"url": "http://127.0.0.1:9/pin.tar.gz", "dest": str(tmp_path / "rjudge"),
                                    "lock": str(tmp_path / "lock.json")}
    raw["aura"]["seed_counts"] = {"unintended": 157}
    code, text = _run_estimate(raw, tmp_path, capsys)
    assert code == 0
    assert text.splitlines()[0] == (f"projected from 157 seeds (aura.seed_counts.unintended): {tmp_path / 'rjudge'} "
                                    "is not downloaded yet (rule fetch_seeds)")
    # rollouts projected from the seeds: round(157 x 7.955 items per seed) = round(1248.9) = 1249 (the paper's rows)
    roll = next(ln for ln in estimate(validate_config(raw)) if ln.stage == "rollout")
    assert (roll.basis, roll.calls) == ("projected", 1249)
    raw["aura"].pop("seed_counts")  # without expected counts: aura.estimate.seeds (default 10), still said so
    code, text = _run_estimate(raw, tmp_path, capsys)
    assert text.splitlines()[0].startswith("projected from 10 seeds (aura.estimate.seeds): ")
    assert server.stats()["count"] == 0


def test_missing_seeds_without_a_download_is_an_error(server, tmp_path):
    raw = _config(server, tmp_path)
    raw["paths"]["seeds"] = str(tmp_path / "nowhere")
    with pytest.raises(UserError) as ei:
        estimate(validate_config(raw))
    msg = str(ei.value)
    assert msg.startswith(f"estimate: seed folder {tmp_path / 'nowhere'} does not exist") and "\n" not in msg


def test_unreadable_seeds_are_an_error_not_a_fallback(server, tmp_path):
    raw = _config(server, tmp_path)
    (tmp_path / "seeds" / "IoT" / "broken.json").write_text("{not json")  # beside the good files
    with pytest.raises(UserError) as ei:
        estimate(validate_config(raw))
    assert "estimate: cannot read the seeds in" in str(ei.value) and "broken.json" in str(ei.value)


# --- live vs batch vs prefix-cached cost ----------------------------------------------------------------

def test_batch_and_cached_views_follow_the_price_table(server, tmp_path, capsys):
    from aura.estimate import static_prefix_tokens

    raw = _config(server, tmp_path)
    raw["endpoints"]["fake"]["batch"] = True
    raw["models"]["m"]["price"] = {"input_per_mtok": 10.0, "output_per_mtok": 30.0, "cached_input": 1.0,
                                   "batch_discount": 0.5}
    raw["estimate"] = {"prefix_cache_hit_share": 0.5, "prefix_cache_min_tokens": 0}
    lines = estimate(validate_config(raw))
    # the judge prompts' text before their first variable: 3281, 3124 and 2814 characters (judge_*.v4.md),
    # i.e. 820, 781 and 703 tokens at 4 characters a token; a projected judge line covers the 3 axes: mean 768
    assert [static_prefix_tokens(f"judge_{a}") for a in ("detection", "action_type", "safety")] == [820, 781, 703]
    judge = next(ln for ln in lines if ln.stage == "judge (m)" and ln.model == "m")
    # cached: half of 768 = 384 tokens a call at $1 instead of $10 per 1M: $9 x 384 x calls / 1e6 saved
    assert judge.cached_usd == pytest.approx(judge.cost_usd - 9.0 * 384 * judge.calls / 1e6, rel=1e-12)
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
    raw["estimate"] = {"prefix_cache_min_tokens": 1024}  # every judge prefix (668-829 tokens) is shorter
    lines = estimate(validate_config(raw))
    assert all(ln.batch_usd == ln.cached_usd == ln.both_usd == ln.cost_usd for ln in lines)


# --- the kernel: every line says its role and prompts; the views read them, never the label ------------------

REPO = Path(__file__).resolve().parents[2]


def test_a_line_is_made_with_its_role_and_prompts():
    from aura.estimate import Line

    with pytest.raises(TypeError):
        Line("judge (m)", "m", "projected")  # no role, no prompts: refused, nothing guessed from the label
    with pytest.raises(TypeError, match="prompts"):
        Line("judge (m)", "m", "projected", role="judge", prompts="judge_safety")
    line = Line("x", "m", "exact", role="judge", prompts=["judge_safety"])
    assert line.prompts == ("judge_safety",) and line.calls == 0


def test_views_read_the_role_and_prompts_not_the_label(server, tmp_path):
    from aura.estimate import estimate_views, priced_line, static_prefix_tokens

    raw = _config(server, tmp_path)
    raw["endpoints"]["fake"]["batch"] = True
    raw["models"]["m"]["price"] = {"input_per_mtok": 10.0, "output_per_mtok": 30.0, "cached_input": 1.0}
    raw["estimate"] = {"prefix_cache_hit_share": 1.0, "prefix_cache_min_tokens": 0}
    cfg = validate_config(raw)

    def line(stage, role, prompts):
        return priced_line(cfg, stage, "m", "projected", role=role, prompts=prompts, calls=10, tokens_in=20_000,
                           tokens_out=1_000)

    judge_label = line("judge:safety (m)", None, ())  # looks like a judge line; its calls are not a batched role
    judged = line("pasbench-judge (m)", "judge", ("risk_judge",))
    reviewed = line("anything", "reviewer", ("p9_pair_review",))
    own_role = line("lpsbench-evaluate (m, raw)", "lps_evaluator", ("evaluator",))  # a role the Batch API never takes
    lines = [judge_label, judged, reviewed, own_role]
    estimate_views(cfg, lines)
    assert judge_label.batch_usd == judge_label.cached_usd == judge_label.cost_usd
    assert own_role.batch_usd == own_role.cost_usd
    assert judged.batch_usd == pytest.approx(judged.cost_usd / 2)
    assert reviewed.batch_usd == pytest.approx(reviewed.cost_usd / 2)
    # cached: the whole static prefix of the line's own prompt, per call, at $1 instead of $10 per 1M
    assert judged.cached_usd == pytest.approx(judged.cost_usd - 9.0 * 10 * static_prefix_tokens("risk_judge") / 1e6)
    assert own_role.cached_usd == pytest.approx(own_role.cost_usd - 9.0 * 10 * static_prefix_tokens("evaluator") / 1e6)


def test_every_aura_line_carries_the_role_its_stage_runs_under(server, tmp_path):
    raw = _config(server, tmp_path)
    raw["models"]["env"] = {**raw["models"]["m"], "model_id": "env-model"}
    raw["aura"]["construct"] = {"composed": {"enabled": True}}
    raw["aura"]["evaluate"] = {"open_ended": {"enabled": True, "max_steps": 3, "emulator": "env"},
                               "consistency_models": ["m"]}
    lines = estimate(validate_config(raw))
    roles = {}
    for ln in lines:
        roles.setdefault(ln.stage, set()).add(ln.role)
    role = {stage: r.pop() for stage, r in roles.items() if len(r) == 1}
    assert len(role) == len(roles)  # one role per stage label
    assert role["tag-truncate (P1)"] == role["generate-variations (P3/P4)"] == "generator"
    assert role["composed-variations"] == "generator"
    assert role["review-variations (P5/P6)"] == role["review-pairs (P9)"] == role["composed-review"] == "reviewer"
    assert role["classify (P7)"] == role["composed-classify"] == "classifier"
    assert role["rollout"] == role["rollout (composed, m)"] == role["open-ended agent (m)"] == "evaluated"
    assert role["judge (m)"] == role["repeat1 (m)"] == role["repeat2 (m)"] == "judge"
    assert role["judge (composed, m)"] == role["open-ended judge (m)"] == "judge"
    assert role["open-ended emulator (m)"] == "open_ended_emulator"
    prompts = {ln.stage: ln.prompts for ln in lines}
    assert prompts["review-variations (P5/P6)"] == ("p5_harm_intensity_review", "p6_contextual_review")
    assert prompts["judge (m)"] == ("judge_detection", "judge_action_type", "judge_safety")
    assert prompts["open-ended judge (m)"] == ("judge_action_type", "judge_safety")
    assert prompts["open-ended emulator (m)"] == ("emulator_open_ended", "user_open_ended")
    assert all(ln.prompts for ln in lines)


def _pasbench(server, tmp_path, batch_roles):
    """PaSBench alone on the demo set: m answers, jb judges on `fake` (batch: true), jc reviews on `live` (none)."""
    raw = _config(server, tmp_path)
    raw["families"] = ["pasbench"]
    raw["endpoints"]["fake"]["batch"] = True
    raw["endpoints"]["live"] = {**raw["endpoints"]["fake"], "batch": False}
    raw["models"]["jb"]["price"] = {"input_per_mtok": 2.0, "output_per_mtok": 8.0, "batch_discount": 0.5}
    raw["models"]["jc"] = {**raw["models"]["jc"], "endpoint": "live",
                           "price": {"input_per_mtok": 2.0, "output_per_mtok": 8.0}}
    raw["llm"] = {"batch": {"roles": batch_roles}}
    raw["pasbench"] = {"samples": 2, "evaluated": ["m"], "judge": "jb",
                       "data": {"path": str(REPO / "data" / "raw" / "pasbench_demo")},
                       "construct": {"enabled": True, "generator": "m", "reviewer": "jc", "knowledge_points": 1}}
    return raw


def test_the_pasbench_judge_is_priced_through_the_batch_api(server, tmp_path, capsys):
    import inspect

    from aura.families.pasbench import judge as pas_judge

    assert 'llm.run("judge", judge,' in inspect.getsource(pas_judge.run)  # the role the judge stage runs under
    raw = _pasbench(server, tmp_path, ["judge", "reviewer"])
    lines = estimate(validate_config(raw))
    by = {ln.stage: ln for ln in lines}
    judged, reactive = by["pasbench-judge (m)"], by["pasbench-reactive:judge (m)"]
    assert (judged.role, judged.prompts, judged.model) == ("judge", ("risk_judge",), "jb")
    assert judged.cost_usd > 0 and judged.batch_usd == pytest.approx(judged.cost_usd / 2)
    assert reactive.role == "judge" and reactive.batch_usd == pytest.approx(reactive.cost_usd / 2)
    respond = by["pasbench-respond"]  # the evaluated model's calls: never batched, same endpoint or not
    assert respond.role == "evaluated" and respond.batch_usd == respond.cost_usd
    review = by["pasbench-review-text"]  # the reviewer's calls, on an endpoint without batch: true: live
    assert review.role == "reviewer" and review.batch_usd == review.cost_usd > 0
    assert {ln.role for ln in lines} == {"evaluated", "judge", "generator", "reviewer"}
    code, out = _run_estimate(raw, tmp_path, capsys)
    assert code == 0 and "this config sends through the Batch API: judge, reviewer (llm.batch.roles)" in out
    assert f"batchable calls on endpoints without a batch API (stay at live price): live ${review.cost_usd:,.2f}" in out
    total = next(row for row in out.splitlines() if row.startswith("TOTAL")).split()
    assert float(total[-3]) == pytest.approx(sum(ln.batch_usd for ln in lines), abs=1e-4)
    assert float(total[-3]) < float(total[-4])
    assert server.stats()["count"] == 0


def test_lpsbench_lines_carry_their_own_roles(server, tmp_path):
    raw = _config(server, tmp_path)
    raw["families"] = ["lpsbench"]
    raw["endpoints"]["fake"]["batch"] = True
    raw["lpsbench"] = {"cases": {"path": str(REPO / "data" / "raw" / "lpsbench_demo")}, "evaluated": ["m"],
                       "emulator": "jb", "user_simulator": "jc", "evaluator": "jb", "ask_user_extension": True}
    lines = estimate(validate_config(raw))
    role = {ln.stage: ln.role for ln in lines}
    assert role["lpsbench-episodes:agent (raw)"] == "lps_agent" and role["lpsbench-evaluate (m, raw)"] == "lps_evaluator"
    assert role["lpsbench-episodes:emulator (m, raw)"] == "lps_emulator"
    assert role["lpsbench-episodes:user (m)"] == "lps_user"
    prompts = {ln.stage: ln.prompts for ln in lines}
    assert prompts["lpsbench-episodes:agent (mitigated)"] == ("agent_clarify", "agent_safety")
    # none of these roles goes through the Batch API (llm.batch.roles: judge, reviewer, classifier)
    assert all(ln.batch_usd == ln.cost_usd for ln in lines)


def test_a_line_prices_the_model_its_calls_setting_names(server, tmp_path):
    """Call.model: a call on a config setting is priced on that setting's model (None: read from it); a family
    that names another model for it is refused, in one line. A call on the job's model takes the one named."""
    from aura.estimate import call_models, stage_line

    raw = _config(server, tmp_path)
    raw["families"] = ["lpsbench"]
    raw["lpsbench"] = {"cases": {"path": str(REPO / "data" / "raw" / "lpsbench_demo")}, "evaluated": ["m"],
                       "emulator": "jb", "evaluator": "jc"}
    cfg = validate_config(raw)
    assert call_models(cfg, "lpsbench-episodes", "emulator") == ["jb"]
    assert call_models(cfg, "lpsbench-episodes", "agent") is None  # --model: the job's
    assert stage_line(cfg, "lpsbench-episodes", "emulator", None, 3, 100).model == "jb"
    assert stage_line(cfg, "lpsbench-episodes", "agent", "m", 3, 100).model == "m"
    with pytest.raises(ValueError, match=r"^stage lpsbench-episodes: its emulator call's model \(lpsbench.emulator\) "
                                         r"is jb, not 'jc'$"):
        stage_line(cfg, "lpsbench-episodes", "emulator", "jc", 3, 100)
    with pytest.raises(ValueError, match="names no model: the estimate needs one"):
        stage_line(cfg, "lpsbench-episodes", "agent", None, 3, 100)


def test_a_plugin_family_hands_its_lines_through_its_hook(server, tmp_path, monkeypatch):
    import sys
    import types

    import aura.families as registry
    from aura.estimate import Line, projected_line
    from aura.families.base import Family

    raw = _config(server, tmp_path)
    raw["endpoints"]["fake"]["batch"] = True
    cfg = validate_config(raw)
    hooks = types.ModuleType("plugin_estimate_hooks")
    hooks.lines = lambda config: ([projected_line(config, "plugin-judge", "m", 4, 100, role="judge", prompts=(),
                                                  out_each=10)], "plugin: 4 items")
    hooks.broken = lambda config: ([{"stage": "x"}], "")
    monkeypatch.setitem(sys.modules, "plugin_estimate_hooks", hooks)

    def family(hook):
        return Family(name="plugin", title="a plugin", stages={}, layout=lambda raw: {}, reports={},
                      targets=lambda raw: [], root=tmp_path, nested=False, estimate=hook)

    monkeypatch.setattr(registry, "enabled", lambda raw: [family("plugin_estimate_hooks:lines"), family(None)])
    lines = estimate(cfg)
    assert [ln.stage for ln in lines] == ["plugin-judge"] and lines.note == "plugin: 4 items"
    assert isinstance(lines[0], Line) and lines[0].batch_usd == pytest.approx(lines[0].cost_usd / 2)
    monkeypatch.setattr(registry, "enabled", lambda raw: [family("plugin_estimate_hooks:broken")])
    with pytest.raises(TypeError, match="family 'plugin'"):
        estimate(cfg)


def test_the_kernel_names_no_family_and_no_stage_module_imports_an_estimate():
    import subprocess
    import sys

    from aura.families import names

    text = (REPO / "src" / "aura" / "estimate.py").read_text()
    assert not [n for n in names() if f"families.{n}" in text]  # no family module
    assert not [n for n in names() if n != "aura" and n in text.lower()] and "AURA" not in text  # aura: the package
    code = ("import sys, aura.estimate; print(sorted(m for m in sys.modules if m.startswith('aura.families')));"
            "import aura.families.aura.construct.composed, aura.families.aura.evaluate.open_ended,"
            " aura.families.pasbench.judge, aura.families.lpsbench.evaluate;"
            "print(sorted(m for m in sys.modules if m.endswith('.estimate')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.splitlines()
    assert out == ["[]", "['aura.estimate']"]  # the kernel imports no family; the stages import no family estimate


# --- reasoning tokens: assumed per call (estimate.reasoning_tokens), within the call's output cap -------------

def _reasoning_config(server, tmp_path, assumed: dict, **params):
    """One judge-only PaSBench-free config: AURA's projected lines on the 10 seeds, m at $10 / $30 per 1M."""
    raw = _config(server, tmp_path)
    raw["estimate"] = {"reasoning_tokens": assumed}
    raw["models"]["m"]["params"] = {"temperature": 0.0, "seed": 1, **params}
    return raw


def test_reasoning_tokens_assumed_for_one_model_are_priced_as_output(server, tmp_path, capsys):
    # m without an output cap (no max_tokens): rollout answers at the default 200 tokens, + 1000 reasoning
    raw = _reasoning_config(server, tmp_path, {"m": 1000})
    lines = estimate(validate_config(raw))
    roll = next(ln for ln in lines if ln.stage == "rollout")
    # 10 seeds x 7.955 items per seed = round(79.55) = 80 rollouts
    assert (roll.calls, roll.reasoning_each, roll.reasoning_tokens) == (80, 1000, 80_000)
    assert roll.tokens_out == 80 * (200 + 1000) == 96_000
    # reasoning at m's output price: 80,000 tokens x $30 / 1M = $2.40, inside the line's cost
    assert roll.reasoning_usd == pytest.approx(2.40, rel=1e-12)
    assert roll.cost_usd == pytest.approx(roll.tokens_in * 10.0 / 1e6 + 96_000 * 30.0 / 1e6, rel=1e-12)
    others = [ln for ln in lines if ln.model != "m"]  # the panel's other judges: not named, none assumed
    assert others and all(ln.reasoning_each is None and ln.reasoning_tokens == 0 for ln in others)
    code, out = _run_estimate(raw, tmp_path, capsys)
    assert code == 0
    def row(stage: str, model: str) -> list[str]:
        return next(r.split() for r in out.splitlines() if r[:34].strip() == stage and r[35:61].strip() == model)

    assert row("rollout", "m")[-5] == "1000"  # the reason/call column, before the four costs
    assert row("judge (m)", "jb")[-5] == "none"  # jb is not named: no reasoning assumed
    rows = {r[:34].strip(): r.split() for r in out.splitlines() if r.startswith(("TOTAL", "  of which"))}
    with_r, only_r = rows["TOTAL"], rows["of which reasoning"]
    without = rows["TOTAL without reasoning tokens"]
    total_live = sum(ln.cost_usd for ln in lines)
    reasoning_live = sum(ln.reasoning_usd for ln in lines)  # every line of m: its calls x 1000 x $30 / 1M
    assert reasoning_live == pytest.approx(sum(ln.calls for ln in lines if ln.model == "m") * 1000 * 30.0 / 1e6)
    assert float(with_r[-4]) == pytest.approx(total_live, abs=1e-4)
    assert float(only_r[-4]) == pytest.approx(reasoning_live, abs=1e-4)
    assert float(without[-4]) == pytest.approx(total_live - reasoning_live, abs=1e-4)
    assert int(only_r[-5]) == sum(ln.reasoning_tokens for ln in lines)
    assert "estimate.reasoning_tokens, until measured: m 1000" in out
    assert server.stats()["count"] == 0


def test_max_completion_tokens_is_read_as_the_output_cap(server, tmp_path):
    # a reasoning model's cap is max_completion_tokens, and it holds the reasoning too: 200 visible + 1000
    # assumed would be 1200 > 500, so each rollout is 200 visible + 300 reasoning = 500
    raw = _reasoning_config(server, tmp_path, {"m": 1000}, max_completion_tokens=500)
    lines = estimate(validate_config(raw))
    roll = next(ln for ln in lines if ln.stage == "rollout")
    assert (roll.reasoning_each, roll.tokens_out) == (300, 80 * 500)
    # the judge's answers (default 120) + 380 reasoning = 500 per call, capped the same way
    judge = next(ln for ln in lines if ln.stage == "judge (m)" and ln.model == "m")
    assert (judge.reasoning_each, judge.tokens_out) == (380, judge.calls * 500)
    from aura.estimate import _reasoning_cell, completion_tokens, output_cap

    assert _reasoning_cell(roll, {"m": 1000}) == "300 cap"
    # a visible answer larger than the cap is cut by it too (estimate.completion_tokens rollout 800 -> 500)
    raw["estimate"]["completion_tokens"] = {"rollout": 800}
    assert completion_tokens(validate_config(raw), "rollout", "m") == 500
    assert output_cap({"max_completion_tokens": 500}) == 500 and output_cap({"max_tokens": 64}) == 64
    assert output_cap({"max_tokens": 64, "max_completion_tokens": 500}) == 64 and output_cap({}) is None


def test_an_unknown_model_in_reasoning_tokens_stops_the_estimate(server, tmp_path):
    raw = _reasoning_config(server, tmp_path, {"m9": 1000})
    with pytest.raises(ConfigError) as ei:  # the CLI prints it as one line
        estimate(validate_config(raw))
    assert str(ei.value) == "estimate.reasoning_tokens: unknown model(s) m9 (not under models:)"


def test_without_assumptions_the_estimate_is_as_before(server, tmp_path, capsys):
    raw = _config(server, tmp_path)  # estimate.reasoning_tokens defaults to {}
    lines = estimate(validate_config(raw))
    assert all(ln.reasoning_each is None and ln.reasoning_tokens == 0 and ln.reasoning_usd == 0 for ln in lines)
    roll = next(ln for ln in lines if ln.stage == "rollout")
    assert roll.tokens_out == roll.calls * 64  # max_tokens 64 caps each answer, nothing added
    code, out = _run_estimate(raw, tmp_path, capsys)
    assert code == 0 and "TOTAL without reasoning tokens" not in out and "until measured: none" in out


def test_the_cost_per_endpoint_adds_up_the_lines_of_its_models(tmp_path, capsys):
    """Two endpoints: the test config's models on `fake`, and jc moved to a second endpoint `other`. Each
    endpoint's live / batch / cached / batch+cached cost is the sum of its models' lines, and the two add up
    to the estimate's totals."""
    from aura.estimate import by_endpoint, totals

    raw = base_config("http://127.0.0.1:9/v1", tmp_path / "cache")
    raw["endpoints"]["other"] = {**raw["endpoints"]["fake"], "base_url": "http://127.0.0.1:10/v1", "batch": True}
    raw["models"]["jc"]["endpoint"] = "other"
    raw["llm"] = {"batch": {"roles": ["judge", "reviewer"]}}
    config = validate_config(raw)
    lines = estimate(config)
    per = by_endpoint(config, lines)
    assert set(per) == {"fake", "other"}
    for ep in per:
        mine = [ln for ln in lines if config.models[ln.model].endpoint == ep]
        assert per[ep]["calls"] == sum(ln.calls for ln in mine)
        assert per[ep]["cost_usd"] == pytest.approx(sum(ln.cost_usd for ln in mine))
        assert per[ep]["batch_usd"] == pytest.approx(sum(ln.batch_usd for ln in mine))
    # only `other` takes a batch API: its judge and review lines at half price, fake's at full
    assert per["fake"]["batch_usd"] == pytest.approx(per["fake"]["cost_usd"])
    assert per["other"]["batch_usd"] == pytest.approx(0.5 * per["other"]["cost_usd"])
    tot = totals(lines)["with"]
    assert sum(r["cost_usd"] for r in per.values()) == pytest.approx(tot["cost_usd"])
    code, out = _run_estimate(raw, tmp_path, capsys)
    assert code == 0 and out.splitlines()[-1].startswith("by endpoint (live / batch / cached / batch+cached, USD): ")
