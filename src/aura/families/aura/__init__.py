"""The AURA-Eval family (the paper this repository reproduces): dataset construction from R-Judge seeds,
evaluation by rollouts judged by a panel, and the paper's statistics, figures and tables.

Its code lies in this package: data/ (the R-Judge loader, seed source and counts, trajectory text),
construct/ (P1-P9), evaluate/ (rollouts, judges, panel), stats/ (the paper's tables), estimate.py,
notebooks.py (what its notebooks share), viewer.py (its part of `aura view`), annotate/ (`aura
annotate`), dag.py (its rules' helpers), settings.py (its config section `aura:`). Its files outside the
package stay where users know them: rules/aura/, prompts/aura/, notebooks/aura/, report/aura/,
data/raw/demo_seeds/. Stage names stay unprefixed. This manifest imports nothing heavy.
"""
from __future__ import annotations

from pathlib import Path

import yaml

from aura.config import REPO_ROOT
from aura.families.base import Call, Family, Stage, one_of

from .layout import PAPER_STATS, layout
from .reports import EXPERIMENT_REPORTS, REPORTS, REPRODUCTION_REPORTS
from .settings import check, section

HERE = Path(__file__).parent
C, E, T = "aura.families.aura.construct", "aura.families.aura.evaluate", "aura.families.aura.stats"
AXES = ("detection", "action_type", "safety")


def _axes(value: str) -> str | None:
    given = value.split(",")
    bad = [a for a in given if a not in AXES]
    if bad or len(set(given)) != len(given):
        return f"expected distinct axes from {list(AXES)}, comma-separated"
    return None


def _run_index(value: str) -> str | None:
    return None if value.isdigit() else "expected a run index 0, 1, 2, ..."


def _io(*names: str) -> dict[str, str]:
    """--in / --out names that are the layout keys they read or write."""
    return {n: n for n in names}


def _generate(*prompts: str) -> dict[str, Call]:
    return {"generate": Call("generator", "aura.roles.generator", prompts, out_tokens=700)}


def _review(*prompts: str) -> dict[str, Call]:
    return {"review": Call("reviewer", "--model", prompts, out_tokens=700)}


CLASSIFY = {"classify": Call("classifier", "aura.roles.classifier", ("p7_pair_classification",), out_tokens=700)}
JUDGE_PROMPTS = tuple(f"judge_{axis}" for axis in AXES)
CONSTRUCTED = ("seeds", "tags", "prefixes", "relevance", "variations")

STAGES: dict[str, Stage] = {
    "fetch-seeds": Stage("download the configured seed archive, verify its checksum", f"{C}.seeds:fetch"),
    "select-seeds": Stage("load R-Judge-layout seeds, keep unintended", f"{C}.seeds:run", inputs={"seeds_dir": None},
                          outputs=_io("seeds")),
    "tag-truncate": Stage("P1 risk trigger / execution point tags; at-trigger and pre-execution prefixes",
                          f"{C}.tagging:run", inputs=_io("seeds"), outputs=_io("tags", "prefixes"),
                          prompts=("p1_step_tagging",), calls=_generate("p1_step_tagging")),
    "relevance": Stage("P2 dimension relevance; one candidate request per (prefix, relevant dimension)",
                       f"{C}.relevance:run", inputs=_io("seeds", "prefixes"), outputs=_io("relevance"),
                       prompts=("p2_dimension_relevance", "dimensions"), calls=_generate("p2_dimension_relevance")),
    "generate-variations": Stage("P3/P4 variation generation with the frozen-agent-step check", f"{C}.variations:run",
                                 inputs=_io("seeds", "prefixes", "relevance"), outputs=_io("variations"),
                                 prompts=("p3_harm_intensity_variation", "p4_contextual_variation", "dimensions"),
                                 calls=_generate("p3_harm_intensity_variation", "p4_contextual_variation")),
    "review-variations": Stage("P5/P6 variation review by one reviewer", f"{C}.review:run_variations",
                               inputs=_io("seeds", "prefixes", "variations"), outputs={"review": "variation_review"},
                               prompts=("p5_harm_intensity_review", "p6_contextual_review", "dimensions"),
                               calls=_review("p5_harm_intensity_review", "p6_contextual_review")),
    "classify": Stage("P7 NSP/SP classification of originals and accepted variations", f"{C}.classify:run",
                      inputs={**_io("seeds", "prefixes", "variations"), "reviews": None}, outputs=_io("classified"),
                      prompts=("p7_pair_classification",), calls=CLASSIFY),
    "generate-pairs": Stage("P8 minimal-flip pair generation with prefix and agent-step checks", f"{C}.pairs:run",
                            inputs=_io("seeds", "classified"), outputs=_io("pairs"), prompts=("p8_pair_generation",),
                            calls=_generate("p8_pair_generation")),
    "review-pairs": Stage("P9 pair review by one reviewer", f"{C}.review:run_pairs", inputs=_io("pairs"),
                          outputs={"review": "pair_review"}, prompts=("p9_pair_review",), calls=_review("p9_pair_review")),
    "finalize": Stage("released dataset rows with stable ids, exclusions, data card", f"{C}.finalize:run",
                      inputs={**_io(*CONSTRUCTED), "reviews": None, **_io("classified", "pairs"),
                              "pair_reviews": None, "exclusions_file": None},
                      outputs={**_io("dataset", "exclusions"), "card": "datacard"}),
    "construction-counts": Stage("dataset composition and construction funnel vs the paper", f"{C}.counts:run",
                                 inputs={**_io(*CONSTRUCTED, "classified", "pairs", "dataset"), "pair_reviews": None,
                                         **_io("exclusions")},
                                 outputs={"composition": "construction_composition", "funnel": "construction_funnel"}),
    "leak-probe": Stage("label-blind leak probe: the classifier guesses each released row's pair label from its rationale",
                        f"{C}.leak_probe:run", inputs=_io("dataset"),
                        outputs={"probes": "leak_probe", "summary": "leak_probe_summary"}, prompts=("leak_probe",),
                        calls={"probe": Call("classifier", "aura.roles.classifier", ("leak_probe",), out_tokens=12)}),
    "rollout": Stage("evaluated model continues each prefix (ReAct)", f"{E}.rollout:run",
                     options={"format": one_of("react", "action_only")}, inputs=_io("dataset"),
                     outputs=_io("rollouts"), prompts=("rollout_react", "rollout_action_only"),
                     calls={"rollout": Call("evaluated", "--model", out_tokens=200)}),
    "judge": Stage("one judge labels one model's rollouts on three axes", f"{E}.judge:run",
                   options={"only": one_of("dataset_items", "human_labels"), "axes": _axes, "run": _run_index},
                   inputs={"dataset": "dataset", "human_labels": None, "rollouts": "rollouts"},
                   outputs=_io("judgments"), prompts=JUDGE_PROMPTS,
                   calls={"judge": Call("judge", "--judge", out_tokens=120, per_item=len(AXES))}),
    "panel": Stage("majority vote of the judge panel", f"{E}.panel:run", inputs={"rollouts": None, "judgments": None},
                   outputs=_io("panel")),
    "open-ended": Stage("open-ended rollouts: K ReAct steps per prefix in an LM-emulated text environment",
                        f"{E}.open_ended:run", inputs=_io("dataset"),
                        outputs={"episodes": "open_ended_episodes", "step_items": "open_ended_step_items",
                                 "step_rollouts": "open_ended_step_rollouts"},
                        prompts=("rollout_react", "emulator_open_ended", "user_open_ended"),
                        calls={"agent": Call("evaluated", "--model", ("rollout_react",), out_tokens=200),
                               "environment": Call("open_ended_emulator", "aura.evaluate.open_ended.emulator",
                                                   ("emulator_open_ended", "user_open_ended"), out_tokens=200)}),
    "open-ended-stats": Stage("open-ended rollouts: first risky step, safe-first-then-unsafe rate per model",
                              f"{T}.open_ended:run", inputs={"episodes": None, "panel": None},
                              outputs={"open_ended_episodes": "open_ended_episode_labels",
                                       "open_ended_rates": "open_ended_rates"}),
    "model-rates": Stage("unsafe rates per model with Wilson CIs", f"{T}.rates:run",
                         inputs={"dataset": "dataset", "panel": None}, outputs=_io("model_rates")),
    "format-sample": Stage("stratified 150-scenario draw for prompt-format sensitivity", f"{E}.format_sample:run_sample",
                           options={"size_key": one_of("format_sample_size", "vendor_overlap_sample_size",
                                                       "consistency_sample_size")},
                           inputs=_io("dataset"), outputs={"sample": "format_sample"}),
    "format-stats": Stage("Table 38: every Table 33 column under ReAct vs action-only", f"{E}.format_sample:run_stats",
                          inputs={"sample": "format_sample", "react": None, "action_only": None},
                          outputs={"table38": "table38_prompt_format"}),
    "paper-stats": Stage("Tables 31-37 and figure inputs from panel labels", f"{T}.tables:run",
                         inputs={"dataset": "dataset", "panel": None}, outputs=_io(*PAPER_STATS)),
    "reliability": Stage("judge-panel agreement; Table 3 human validation when human labels are given",
                         f"{T}.reliability:run", inputs={"panel": None, "human_labels": None, "validation": None},
                         outputs={"judge_reliability": "judge_reliability", "table3": "table3_human_validation",
                                  "judge_accuracy": "table21_22_judge_accuracy", "ensembles": "table23_ensembles"}),
    "consistency": Stage("Table 25: intra-judge consistency over repeated runs", f"{T}.consistency:run",
                         inputs={"dataset": None, "human_labels": None, "sample": None, "judgments": None},
                         outputs={"sample": "consistency_sample", "table25": "table25_judge_consistency"}),
    "vendor-overlap": Stage("Table 24: Safe rates with same-vendor judges replaced", f"{T}.vendor_overlap:run",
                            inputs={"sample": "vendor_sample", "panel": None, "judgments": None},
                            outputs={"table24": "table24_vendor_overlap"}),
    "composed-variations": Stage("composed mechanisms: single and two-dimension variations of the same prefixes",
                                 f"{C}.composed:run_variations", inputs=_io("seeds", "prefixes", "relevance"),
                                 outputs={"variations": "composed_variations"},
                                 prompts=("p3_harm_intensity_variation", "p4_contextual_variation",
                                          "composed_variation", "dimensions"), calls=_generate("composed_variation")),
    "composed-review": Stage("composed mechanisms: review by one reviewer (both dimensions' criteria)",
                             f"{C}.composed:run_review",
                             inputs={**_io("seeds", "prefixes"), "variations": "composed_variations"},
                             outputs={"review": "composed_review"},
                             prompts=("p5_harm_intensity_review", "p6_contextual_review", "composed_review",
                                      "dimensions"), calls=_review("composed_review")),
    "composed-classify": Stage("composed mechanisms: P7 labels and the experiment's item set",
                               f"{C}.composed:run_classify",
                               inputs={**_io("seeds", "prefixes"), "variations": "composed_variations", "reviews": None},
                               outputs={"classified": "composed_classified", "dataset": "composed_dataset"},
                               prompts=("p7_pair_classification",), calls=CLASSIFY),
    "composed-stats": Stage("composed mechanisms: unsafe rates, interaction effect, seed-clustered CIs",
                            f"{T}.composed:run", inputs={"dataset": "composed_dataset", "panel": None},
                            outputs=_io("composed_interaction")),
    "validation-sample": Stage("human-validation sample stratified by axis, panel label and agreement, model, domain",
                               f"{T}.validation_sample:run_sample",
                               inputs={"dataset": "dataset", "panel": None, "rollouts": None},
                               outputs={"sample": "validation_sample"}),
    "validation-tables": Stage("Tables 18-19: validation sample sampled / kept per axis and agreement stratum",
                               f"{T}.validation_sample:run_tables",
                               inputs={"sample": "validation_sample", "human_labels": None, "panel": None,
                                       "validation": None},
                               outputs={"table18": "table18_validation_retention", "table19": "table19_validation_strata"}),
    "reproduce": Stage("the paper's reported numbers beside the run's, a verdict each; the paper checked against itself",
                       f"{T}.reproduction:run",
                       inputs={**_io("table33_overall", "table35_flips", "table36_failure_mechanism", "table31_bootstrap",
                                     "table32_matched_pairs", "judged", "fig4_detection", "fig5_action_types",
                                     "fig6_dimensions", "fig8_cells"),
                               "composition": "construction_composition", "funnel": "construction_funnel",
                               # the optional analyses' tables: the rule gives those the config makes
                               **dict.fromkeys(("table3_human_validation", "table18_validation_retention",
                                                "table21_22_judge_accuracy", "table23_ensembles", "table24_vendor_overlap",
                                                "table25_judge_consistency", "table38_prompt_format"))},
                       outputs={"verdicts": "reproduction", "findings": "reproduction_consistency"}),
}


# name -> (folder under prompts/aura/, version in use). Each prompt moves to a new version on its own.
PROMPTS: dict[str, tuple[str, int]] = {
    "p1_step_tagging": ("construct", 3),
    "p2_dimension_relevance": ("construct", 4),
    "p3_harm_intensity_variation": ("construct", 2),
    "p4_contextual_variation": ("construct", 2),
    "p5_harm_intensity_review": ("construct", 2),
    "p6_contextual_review": ("construct", 3),
    "p7_pair_classification": ("construct", 4),
    "p8_pair_generation": ("construct", 3),
    "p9_pair_review": ("construct", 3),
    "leak_probe": ("construct", 1),  # label-blind leak probe on the released rows' rationales (stage leak-probe)
    "composed_variation": ("construct", 1),  # composed mechanisms: two RS dimensions at once (edits)
    "composed_review": ("construct", 2),  # composed mechanisms: review on both dimensions' criteria
    "dimensions": ("construct", 1),  # RS1-RS6 / SD1-SD5 definitions (.yaml), rendered into P2, P4, P6
    "rollout_react": ("evaluate", 2),
    "rollout_action_only": ("evaluate", 2),
    "judge_detection": ("evaluate", 4),
    "judge_action_type": ("evaluate", 4),
    "judge_safety": ("evaluate", 4),
    "emulator_open_ended": ("evaluate", 1),  # open-ended rollouts: the environment answers a tool call
    "user_open_ended": ("evaluate", 1),  # open-ended rollouts: the user answers the agent's message
}

# Keys of AURA's section that used to sit elsewhere (the config's top level, the shared estimate section).
MOVED_KEYS = {**{key: f"aura.{key}" for key in ("roles", "construct", "evaluate", "stats", "seed_download",
                                                 "seed_counts")},
              **{f"estimate.{key}": f"aura.estimate.{key}" for key in ("seeds", "prefixes_per_seed", "items_per_seed")}}


def targets(config: dict) -> list[str]:
    """What `snakemake all` builds for AURA: the dataset, the rates, every paper statistic, the optional
    analyses the config turns on, and every enabled AURA figure/table."""
    from aura.pipeline import rules_support as S

    from .settings import vendor_overlaps

    L = S.layout(config)
    ev = section(config)["evaluate"]
    return [
        L["dataset"],
        L["model_rates"],
        *[L[name] for name in PAPER_STATS],
        *([L["open_ended_rates"], *S.report_targets(config, ["open_ended_rollouts"])]
          if ev["open_ended"]["enabled"] else []),
        *([L["table38_prompt_format"]] if ev["format_models"] else []),
        *([L["table24_vendor_overlap"]] if vendor_overlaps(config) else []),
        L["judge_reliability"],
        *([L["table25_judge_consistency"]] if ev["consistency_models"] else []),
        *([L["composed_interaction"], *S.report_targets(config, ["composed_interaction"])]
          if section(config)["construct"]["composed"]["enabled"] else []),
        *([L["validation_sample"], L["table18_validation_retention"], L["table19_validation_strata"]]
          if ev["validation_models"] else []),
        *S.report_targets(config, REPORTS),
        L["reproduction"], *S.report_targets(config, REPRODUCTION_REPORTS),
    ]


FAMILY = Family(
    name="aura", title="AURA-Eval: risk awareness of agents on unintended-risk trajectories",
    stages=STAGES, layout=layout, reports={**REPORTS, **EXPERIMENT_REPORTS, **REPRODUCTION_REPORTS}, targets=targets,
    root=REPO_ROOT, demo_data=(REPO_ROOT / "data" / "raw" / "demo_seeds",),
    prompts=PROMPTS, data_prompts=frozenset({"dimensions"}),
    schema=yaml.safe_load((HERE / "schema.yaml").read_text()),
    paths_schema=yaml.safe_load((HERE / "paths_schema.yaml").read_text()),
    check=check, moved_keys=MOVED_KEYS,
    estimate="aura.families.aura.estimate:estimate_lines",
    viewer="aura.families.aura.viewer:PART",
    export="aura.families.aura.dataset_export:export",
    inspect_tasks="aura.families.aura.inspect_task:TASKS",
    commands={"annotate": "aura.families.aura.annotate.command:COMMAND"}, order=0, reproduction="reproduction",
    rehearsal="aura.families.aura.rehearsal:planter",
)
