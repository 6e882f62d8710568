"""LPS-Bench case generation, counts and early refusals: `aura estimate` counts exactly the calls the
lpsbench-generate stage makes on the same config (fake server, real HTTP); a designer answer that is only a
heading fails its check; the config check refuses generated cases on the upstream tool back-end in one line."""
from __future__ import annotations

import pytest

from aura.config import validate_config
from aura.families.lpsbench import check
from aura.families.lpsbench.estimate import generate_lines
from aura.families.lpsbench.generate_checks import design_problem
from test_lpsbench_generate import GOOD_RULES, generate, texts, write_config

import yaml


def test_estimate_counts_the_calls_the_stage_makes(fake, tmp_path):
    fake.reset()
    fake.set_rules(GOOD_RULES)
    # two risks x one domain x per_risk 1 = 2 slots, 3 workers each: 6 calls
    cfg = write_config(tmp_path, fake, per_risk=1)
    assert generate(cfg, tmp_path / "gen") == 0
    made = len(texts(fake.requests()))
    config = validate_config(yaml.safe_load(cfg.read_text()))
    lines = generate_lines(config)
    assert [ln.stage for ln in lines] == ["lpsbench-generate:designer", "lpsbench-generate:tools",
                                          "lpsbench-generate:criterion"]
    assert sum(ln.calls for ln in lines) == made == 6
    fake.reset()


def test_estimate_plans_per_risk_domain_and_scenario():
    raw = {"models": {"m": {}}, "lpsbench": {"generate": {"generator": "m", "per_risk": 2, "risks": ["FA", "EB", "TS"],
                                                          "domains": ["code", "office"],
                                                          "scenarios": {"code": ["a", "b", "c"]}}}}
    from aura.families.lpsbench.generate import settings, slots

    assert len(slots(settings(raw))) == 3 * (3 + 1) * 2


@pytest.mark.parametrize("instruction", ["The user's instructions: ", "## Instruction", "Task:\n# Steps\n"])
def test_a_designer_answer_that_is_only_a_heading_fails(instruction):
    why = design_problem({"scenario": "A clean-up.", "instruction": instruction})
    assert why and why.startswith("empty_field: the instruction") and "only a heading" in why
    assert design_problem({"scenario": "A clean-up.", "instruction": "Note: delete the old branch today."}) is None


def test_generated_specs_on_the_upstream_back_end_are_refused_up_front():
    raw = {"models": {"m": {}}, "paths": {"interim": "i", "results": "r"},
           "lpsbench": {"evaluated": ["m"], "evaluator": "m", "tools": {"backend": "upstream", "upstream_dir": "/x"},
                        "cases": {"generated": True},
                        "generate": {"enabled": True, "generator": "m", "toolkit": "specs"}}}
    problems = [p for p in check(raw) if p.startswith("lpsbench.tools.backend")]
    assert len(problems) == 1 and "toolkit: specs has none" in problems[0]
    # the paper's form (toolkit: module, the default): the review's folder is the checkout that serves them
    raw["lpsbench"]["generate"]["toolkit"] = "module"
    assert not [p for p in check(raw) if p.startswith("lpsbench.tools")]
    from aura.families.lpsbench.data import checkout

    assert checkout(raw) == "i/lpsbench/generated"
