"""The LPS-Bench family: long-horizon tool-using agents over MCP tools (paper: "LPS-Bench: Benchmarking Safety
Awareness of Computer-Use Agents in Long-Horizon Planning under Benign and Adversarial Scenarios").

Stages (rules/lpsbench/lpsbench.smk runs them): the cases are loaded from the configured folder or a pinned
download of upstream's repository (cases whose upstream tool module is broken are excluded with their reason);
every evaluated model runs every case's episode in each configured variant against upstream's own mock tools
or an LM emulation of them (raw; mitigated: the paper's prompt-only mitigations, human-in-the-loop
clarification for benign risks, a safety-aware system prompt for adversarial ones); the evaluator labels each
episode safe / unsafe / execution_failed from the risk category's rules; one stats job writes the Safe Rate
CSVs (safe / all cases of the cell) the Table 3, Table 4 and Fig. 6 notebooks read; the reproduce stage sets the
paper's Tables 3 and 4 beside them (docs/reproducing.md). Case generation (paper §3.2) runs when
`lpsbench.generate.enabled`.
This manifest imports nothing heavy: stage targets are strings, imported only when a stage runs.
"""
from __future__ import annotations

from pathlib import Path

import yaml

from aura.config import REPO_ROOT
from aura.families.base import Call, Family, Stage, one_of

from .paths import PER_RUN, STATS, layout  # noqa: F401 - the family's modules take them here
from .settings import section

P = "aura.families.lpsbench"

VARIANT = {"variant": one_of("raw", "mitigated")}
CASES = {"cases": "lpsbench_cases"}
AGENT_PROMPTS = ("agent_raw", "agent_clarify", "agent_safety")
STAGES: dict[str, Stage] = {
    "lpsbench-fetch": Stage("download the pinned LPS-Bench repository archive (lpsbench.cases.download), verify it",
                            f"{P}.data:run_fetch"),
    "lpsbench-cases": Stage("load the <domain>/<RISK>_<n>.json cases into one file, capped by max_cases",
                            f"{P}.data:run_cases", inputs={"cases_dir": None, "checkout": None},
                            outputs={**CASES, "excluded": "lpsbench_excluded"}),
    "lpsbench-episodes": Stage(
        "one model runs every case's episode (agent over MCP tools) in one variant", f"{P}.episodes:run",
        options=VARIANT, inputs=CASES, outputs={"episodes": "lpsbench_episodes"},
        prompts=(*AGENT_PROMPTS, "emulator", "user_simulator"),
        calls={"agent": Call("lps_agent", "--model", AGENT_PROMPTS, out_tokens=250),
               "emulator": Call("lps_emulator", "lpsbench.emulator", ("emulator",), out_tokens=200),
               "user": Call("lps_user", "lpsbench.user_simulator", ("user_simulator",), out_tokens=120)}),
    "lpsbench-evaluate": Stage(
        "the evaluator labels each episode safe / unsafe / execution_failed", f"{P}.evaluate:run", options=VARIANT,
        inputs={**CASES, "episodes": "lpsbench_episodes"}, outputs={"evaluations": "lpsbench_evaluations"},
        prompts=("evaluator", "evaluator_risks"),
        calls={"evaluate": Call("lps_evaluator", "lpsbench.evaluator", ("evaluator",), out_tokens=1500)}),
    "lpsbench-stats": Stage(
        "Safe Rate per model x risk (Table 3), x domain (Table 4), raw vs mitigated (Fig. 6)", f"{P}.stats:run",
        inputs={**CASES, "excluded": "lpsbench_excluded", "evaluations": None},
        outputs={name: f"lpsbench_stats_{name}" for name in STATS}),
    "lpsbench-reproduce": Stage(
        "the paper's Tables 3 and 4 beside the run's raw Safe Rates, a verdict per cell; the paper checked against "
        "itself", f"{P}.reproduction:run",
        inputs={name: f"lpsbench_stats_{name}" for name in ("safe_rate_by_risk", "safe_rate_by_domain")},
        outputs={"verdicts": "lpsbench_reproduction", "findings": "lpsbench_reproduction_consistency"}),
    "lpsbench-generate": Stage(
        "case generation (paper §3.2): designer -> tool developer -> criteria formulator per (domain, risk) slot, "
        "checked in code", f"{P}.generate:run_generate",
        outputs={"drafts": "lpsbench_generate_drafts", "exclusions": "lpsbench_generate_exclusions"},
        prompts=("generate_templates", "generate_designer", "generate_module", "generate_tools", "generate_criterion"),
        # one call per slot and worker (generate.slots plans the slots; a re-ask after a failed check is extra);
        # the tool developer writes a module (toolkit: module; upstream's average 1,700 tokens, + JSON escaping and the
        # tool list) or specs (toolkit: specs)
        calls={step: Call("generator", "lpsbench.generate.generator", (f"generate_{step}",), out_tokens=out)
               for step, out in (("designer", 700), ("module", 2500), ("tools", 3000), ("criterion", 300))}),
    "lpsbench-review-cases": Stage(
        "a person's review file drops rejected generated cases; their feedback goes to the next iteration",
        f"{P}.generate_review:run_review", inputs={"drafts": "lpsbench_generate_drafts"},
        outputs={"cases": None, "reviews": "lpsbench_generate_reviews", "feedback": "lpsbench_generate_feedback"}),
}

VARIANTS = ("raw", "mitigated")


def evaluated(raw: dict) -> list[str]:
    return list(section(raw).get("evaluated") or [])


def variants(raw: dict) -> list[str]:
    return list(section(raw).get("variants") or VARIANTS)


def runs(raw: dict) -> list[tuple[str, str]]:
    """Every (model, variant) job pair, models first."""
    return [(m, v) for m in evaluated(raw) for v in variants(raw)]


def cases_dir(raw: dict) -> str | None:
    """The folder of case files the cases job reads (path, or the download's dest[/cases]); None if unset."""
    from .data import LpsDataError, cases_folder

    try:
        return cases_folder(raw)
    except LpsDataError:
        return None


def checkout_dir(raw: dict) -> str | None:
    """The upstream checkout whose tools/ serve the cases (tools.upstream_dir, else the download's dest)."""
    from .data import checkout

    return checkout(raw)


def generate_on(raw: dict) -> bool:
    return bool((section(raw).get("generate") or {}).get("enabled"))


def check(raw: dict) -> list[str]:
    """Problems of the `lpsbench` section the schema cannot see (models by name), one line each."""
    lp, models = section(raw), raw.get("models", {})
    problems, named = [], [("lpsbench.evaluated", m) for m in evaluated(raw)]
    if evaluated(raw):
        upstream = (lp.get("tools") or {}).get("backend") == "upstream"
        roles = ([] if upstream else ["emulator"]) + ["evaluator"] + (
            ["user_simulator"] if "mitigated" in variants(raw) and lp.get("ask_user_extension") else [])
        from .data import checkout

        if upstream and not checkout(raw):
            problems.append("lpsbench.tools.upstream_dir: an LPS-Bench checkout (or lpsbench.cases.download) is "
                            "required with backend upstream")
        for role in roles:
            if not lp.get(role):
                problems.append(f"lpsbench.{role}: a model is required when lpsbench.evaluated is not empty")
            named.append((f"lpsbench.{role}", lp.get(role)))
    if lp.get("texts") == "upstream" and not checkout_dir(raw):
        problems.append("lpsbench.texts: upstream needs an LPS-Bench checkout (tools.upstream_dir or cases.download)")
    if (lp.get("cases") or {}).get("generated") and not generate_on(raw):
        problems.append("lpsbench.cases.generated: the generated cases need lpsbench.generate.enabled: true")
    if ((lp.get("cases") or {}).get("generated") and evaluated(raw) and (lp.get("tools") or {}).get("backend") ==
            "upstream" and (lp.get("generate") or {}).get("toolkit") == "specs"):
        problems.append("lpsbench.tools.backend: upstream serves each case's mock-tool module, and a case generated with "
                        "generate.toolkit: specs has none: use toolkit: module, or tools.backend: emulated")
    if generate_on(raw):
        generator = lp["generate"].get("generator")
        if not generator:
            problems.append("lpsbench.generate.generator: a model is required when generation is enabled")
        named.append(("lpsbench.generate.generator", generator))
    named += [(f"lpsbench.model_params.{m}", m) for m in lp.get("model_params") or {}]
    for key, model in named:
        if model and model not in models:
            problems.append(f"{key}: unknown model '{model}' (not under models:)")
    return problems


def _evaluating(raw: dict) -> bool:
    return bool(evaluated(raw))


def _comparing(raw: dict) -> bool:
    return bool(evaluated(raw)) and set(VARIANTS) <= set(variants(raw))


REPORTS: dict[str, dict] = {
    "lpsbench_table3_risk": {"notebook": "table3_risk.ipynb",
                             "inputs": ["lpsbench_stats_safe_rate_by_risk", "lpsbench_excluded"], "figure": False,
                             "tables": ["lpsbench_table3_risk"], "needs": _evaluating},
    "lpsbench_table4_domain": {"notebook": "table4_domain.ipynb",
                               "inputs": ["lpsbench_stats_safe_rate_by_domain", "lpsbench_excluded"], "figure": False,
                               "tables": ["lpsbench_table4_domain"], "needs": _evaluating},
    "lpsbench_fig6_mitigation": {"notebook": "fig6_mitigation.ipynb",
                                 "inputs": ["lpsbench_stats_mitigation", "lpsbench_excluded"],
                                 "tables": ["lpsbench_fig6_mitigation"], "needs": _comparing},
}

# The reproduction report (docs/reproducing.md), kept apart from REPORTS (the stats notebooks, which
# tests/core/test_notebooks_degenerate.py renders on synthetic stats); tested in tests/lpsbench/test_lpsbench_reproduction.py.
REPRODUCTION_REPORTS: dict[str, dict] = {
    "lpsbench_reproduction": {"notebook": "reproduction.ipynb",
                              "inputs": ["lpsbench_reproduction", "lpsbench_reproduction_consistency"],
                              "tables": ["lpsbench_reproduction", "lpsbench_reproduction_consistency"],
                              "needs": _evaluating},
}


def targets(config: dict) -> list[str]:
    """What `snakemake all` builds for LPS-Bench: the cases, the stats CSVs and every enabled table/figure (when
    models are evaluated), and the generated cases (when generation is on)."""
    from aura.pipeline import rules_support as S

    L = layout(config)
    out = [L["lpsbench_cases"]]
    if evaluated(config):
        out += [L[f"lpsbench_stats_{name}"] for name in STATS] + [L["lpsbench_reproduction"]]
    if generate_on(config):
        out += [L["lpsbench_generated_cases"], L["lpsbench_generate_exclusions"]]
    return out + S.report_targets(config, {**REPORTS, **REPRODUCTION_REPORTS})


# name -> (folder under prompts/lpsbench/, '' for none; version in use)
PROMPTS: dict[str, tuple[str, int]] = {
    "agent_raw": ("", 2),  # autonomous execution, tool outputs as ground truth (paper Fig. 21)
    "agent_clarify": ("", 4),  # benign mitigation (Fig. 22, §4.5): pause under ambiguity or a high-stakes step
    "agent_safety": ("", 3),  # adversarial mitigation (Fig. 23): upstream's five attack vectors, refusal if malicious AND endangers
    "emulator": ("", 2),  # plays the mock tools from their behaviour; never told the risk
    "user_simulator": ("", 2),  # ask_user extension only; never sees the criterion
    "evaluator": ("", 4),  # the generic template (Fig. 20): the record and the criterion, as upstream's ...
    "evaluator_risks": ("", 3),  # ... filled with each risk category's context, principles and rules
    "generate_templates": ("", 1),
    "generate_designer": ("", 2),  # with the risk's template (upstream's or ours) and the rejected draft
    "generate_tools": ("", 2),  # with the risk's template (upstream's or ours) and the rejected draft
    "generate_module": ("", 1),  # the toolkit as a LangChain @tool module (generate.toolkit: module, the paper's)
    "generate_criterion": ("", 2),  # with the risk's template (upstream's or ours) and the rejected draft
}

FAMILY = Family(
    name="lpsbench", title="LPS-Bench: planning-time safety of tool-using agents on long-horizon tasks",
    stages=STAGES, layout=layout, reports={**REPORTS, **REPRODUCTION_REPORTS}, targets=targets,
    root=REPO_ROOT, demo_data=(REPO_ROOT / "data" / "raw" / "lpsbench_demo",),
    prompts=PROMPTS, data_prompts=frozenset({"generate_templates", "evaluator_risks"}),
    schema=yaml.safe_load((Path(__file__).parent / "schema.yaml").read_text()), check=check,
    moved_keys={"estimate.lpsbench_steps": "lpsbench.estimate.steps",
                "estimate.lpsbench_user_calls": "lpsbench.estimate.user_calls"},
    estimate="aura.families.lpsbench.estimate:lpsbench_lines",
    viewer="aura.families.lpsbench.viewer:PART", order=2,
    export="aura.families.lpsbench.dataset_export:export", reproduction="lpsbench_reproduction",
    inspect_tasks="aura.families.lpsbench.inspect_task:TASKS",
    tool_roles=frozenset({"lps_agent"}),  # agent.ROLE: the agent's calls offer the case's tools
    rehearsal="aura.families.lpsbench.rehearsal:planter",
)
