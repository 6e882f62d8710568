"""One declaration per stage (aura.pipeline.stage.Stage): the rule's inputs, prompt inputs, outputs and
command line are built from it (rules_support: S.inputs, S.outputs, S.io, S.command), `use_prompt` refuses a
prompt it does not declare, and the estimate prices its declared calls (aura.estimate.stage_line)."""
from __future__ import annotations

import pytest
from snakemake.iocontainers import Namedlist

from aura.config import UserError, validate_config
from aura.estimate import output_cap, stage_line
from aura.families.base import Call, Stage
from aura.pipeline import rules_support as S
from aura.pipeline.context import StageContext
from aura.pipeline.layout import layout
from aura.pipeline.registry import STAGES
from aura.prompts import get_prompt, prompt_file
from conftest import base_config


@pytest.fixture
def config(tmp_path):
    return validate_config(base_config("http://127.0.0.1:9/v1", tmp_path / "cache"))


def test_the_rule_inputs_and_outputs_come_from_the_declaration(config):
    raw, lay = config.raw, layout(config.raw)
    ins = S.inputs(raw, "pasbench-judge")
    # `items` is Snakemake's own name on a rule's input: it is kept under items_, and passed as --in items
    assert ins == {"items_": lay["pasbench_items"], "responses": lay["pasbench_responses"],
                   "prompt_files": [prompt_file("risk_judge")]}
    assert S.outputs(raw, "pasbench-judge") == {"judgments": lay["pasbench_judgments"]}
    assert S.inputs(raw, "judge", dataset="x.jsonl", prompts=["judge_safety"]) == {
        "dataset": "x.jsonl", "rollouts": lay["rollouts"], "prompt_files": [prompt_file("judge_safety")]}
    assert list(S.outputs(raw, "pasbench-stats", only=["rates"])) == ["rates"]


def test_a_rule_cannot_name_what_its_stage_does_not_declare(config):
    with pytest.raises(ValueError, match="declares no input 'scenarios'"):
        S.inputs(config.raw, "pasbench-judge", scenarios="x.jsonl")
    with pytest.raises(ValueError, match="does not declare prompt 'proactive_text'"):
        S.inputs(config.raw, "pasbench-judge", prompts=["proactive_text"])
    with pytest.raises(ValueError, match="declares no option or input 'format'"):
        S.command("judge", options={"format": "react"})


def test_the_command_line_is_built_from_the_declaration():
    assert S.command("judge", model="{wildcards.model}", judge="{wildcards.judge}", options={"axes": "safety"}) == (
        "{AURA} judge --configfile {CONFIGFILE} --model {wildcards.model} --judge {wildcards.judge} "
        "--option axes=safety {params.io} --calls-log {log.calls} 2> {log.main}")
    assert S.command("pasbench-items", folders={"data_dir": "d"}) == (
        "{AURA} pasbench-items --configfile {CONFIGFILE} --in data_dir=d {params.io} 2> {log}")  # no model call
    assert S.command("pasbench-fetch") == "{AURA} pasbench-fetch --configfile {CONFIGFILE} 2> {log}"


def test_io_names_the_paths_as_the_stage_reads_them():
    ins = Namedlist(fromdict={"items_": "i.jsonl", "judgments": ["a.jsonl", "b.jsonl"], "prompt_files": ["p.md"],
                              "rerun_reference": ["r.csv"]})
    outs = Namedlist(fromdict={"rates": "rates.csv"})
    assert S.io(None, ins, outs) == ("--in items=i.jsonl --in judgments_0=a.jsonl --in judgments_1=b.jsonl "
                                     "--out rates=rates.csv")


def test_use_prompt_refuses_a_prompt_the_stage_does_not_declare(config, tmp_path):
    ctx = StageContext(stage="pasbench-judge", config=config, inputs={}, outputs={})
    assert ctx.use_prompt(get_prompt("risk_judge")).name == "risk_judge"
    with pytest.raises(UserError, match="stage pasbench-judge: prompt 'proactive_text' is not one it declares"):
        ctx.use_prompt(get_prompt("proactive_text"))
    assert [p.name for p in ctx.prompts_used] == ["risk_judge"]


def test_a_call_renders_only_prompts_its_stage_declares():
    with pytest.raises(ValueError, match="renders prompt"):
        Stage("x", "m.n:f", prompts=("a",), calls={"c": Call("judge", "--model", ("b",))})


def test_the_estimate_prices_a_declared_call(config, tmp_path):
    line = stage_line(config, "pasbench-judge", "judge", "m", 10, 100)
    judge = STAGES["pasbench-judge"].call("judge")
    assert (line.role, line.prompts, line.calls, line.tokens_in) == ("judge", ("risk_judge",), 10, 1000)
    assert line.tokens_out == 10 * min(judge.out_tokens, output_cap(config.models["m"].params))  # the model's cap
    raw = base_config("http://127.0.0.1:9/v1", tmp_path / "cache")
    raw["estimate"] = {"completion_tokens": {"pasbench-judge:judge": 7}}
    assert stage_line(validate_config(raw), "pasbench-judge", "judge", "m", 10, 100).tokens_out == 70


def test_the_declared_roles_are_the_ones_the_code_sends():
    from aura.families.aura.evaluate import open_ended
    from aura.families.lpsbench import agent, evaluate, tool_server

    assert STAGES["lpsbench-episodes"].call("agent").role == agent.ROLE
    assert STAGES["lpsbench-episodes"].call("emulator").role == tool_server.ROLE
    assert STAGES["lpsbench-episodes"].call("user").role == tool_server.USER_ROLE
    assert STAGES["lpsbench-evaluate"].call("evaluate").role == evaluate.ROLE
    assert STAGES["open-ended"].call("environment").role == open_ended.ROLE
