"""AURA's figure/table manifest: report name -> its notebook (a file of notebooks/aura/) and the produced
files (layout keys) it reads; the caption is report/aura/<name>.rst. `snakemake figures/<name>.pdf`
re-renders one of them from those files, with no model call. `needs(config)` is the condition under which
an optional analysis renders.
"""
from __future__ import annotations

from .settings import section, vendor_overlaps


def _evaluate(config: dict) -> dict:
    return section(config)["evaluate"]


def validation_sample_on(config: dict) -> bool:
    """Tables 18-19 render when the config draws a human-validation sample."""
    return bool(_evaluate(config)["validation_models"])


def _human_labels(config: dict) -> bool:
    return bool(config["paths"].get("human_labels"))


def _validation_panel(config: dict) -> bool:
    """Table 23 needs a validation panel larger than the scoring panel's three judges."""
    from .dag import validation_judges

    return len(validation_judges(config)) > 3


REPORTS = {
    "fig7_detection_levels": {
        "notebook": "fig7_detection_levels.ipynb",
        "inputs": ["fig4_detection"],
    },
    "table34_case_study": {
        "notebook": "tab34_case_study.ipynb",
        "inputs": ["table34_case_study"],
        "figure": False,
        "tables": ["table34_case_study"],
    },
    "table38_prompt_format": {
        "notebook": "tab38_prompt_format.ipynb",
        "inputs": ["table38_prompt_format"],
        "figure": False,
        "tables": ["table38_prompt_format"],
        "needs": lambda config: bool(_evaluate(config)["format_models"]),
    },
    "judge_reliability": {
        "notebook": "tab_judge_reliability.ipynb",
        "inputs": ["judge_reliability"],
        "figure": False,
        "tables": ["judge_reliability"],
    },
    "table3_human_validation": {
        "notebook": "tab3_human_validation.ipynb",
        "inputs": ["table3_human_validation"],
        "figure": False,
        "tables": ["table3_human_validation"],
        "needs": _human_labels,
    },
    "table25_judge_consistency": {
        "notebook": "tab25_judge_consistency.ipynb",
        "inputs": ["table25_judge_consistency"],
        "figure": False,
        "tables": ["table25_judge_consistency"],
        "needs": lambda config: bool(_evaluate(config)["consistency_models"]),
    },
    "table21_22_judge_accuracy": {
        "notebook": "tab21_22_judge_accuracy.ipynb",
        "inputs": ["table21_22_judge_accuracy"],
        "figure": False,
        "tables": ["table21_judge_accuracy", "table22_judge_accuracy_by_consensus"],
        "needs": _human_labels,
    },
    "table23_ensembles": {
        "notebook": "tab23_ensembles.ipynb",
        "inputs": ["table23_ensembles"],
        "figure": False,
        "tables": ["table23_ensembles"],
        "needs": _validation_panel,
    },
    "table18_validation_retention": {
        "notebook": "tab18_validation_retention.ipynb",
        "inputs": ["table18_validation_retention"],
        "figure": False,
        "tables": ["table18_validation_retention"],
        "needs": validation_sample_on,
    },
    "table19_validation_strata": {
        "notebook": "tab19_validation_strata.ipynb",
        "inputs": ["table19_validation_strata"],
        "figure": False,
        "tables": ["table19_validation_strata"],
        "needs": validation_sample_on,
    },
    "table24_vendor_overlap": {
        "notebook": "tab24_vendor_overlap.ipynb",
        "inputs": ["table24_vendor_overlap"],
        "figure": False,
        "tables": ["table24_vendor_overlap"],
        "needs": lambda config: bool(vendor_overlaps(config)),
    },
    "construction_funnel": {
        "notebook": "construction_counts.ipynb",
        "inputs": ["construction_composition", "construction_funnel"],
        "tables": ["construction_composition", "construction_funnel"],
    },
    "leak_probe": {
        "notebook": "leak_probe.ipynb",
        "inputs": ["leak_probe_summary"],
        "tables": ["leak_probe"],
    },
    "unsafe_rates": {
        "notebook": "fig_unsafe_rates.ipynb",
        "inputs": ["model_rates"],
    },
    "table33_overall": {
        "notebook": "tab33_overall.ipynb",
        "inputs": ["table33_overall"],
        "figure": False,
        "tables": ["table33_overall"],
    },
    "table31_bootstrap": {
        "notebook": "tab31_bootstrap.ipynb",
        "inputs": ["table31_bootstrap"],
        "figure": False,
        "tables": ["table31_bootstrap"],
    },
    "table32_matched_pairs": {
        "notebook": "tab32_matched_pairs.ipynb",
        "inputs": ["table32_matched_pairs"],
        "figure": False,
        "tables": ["table32_matched_pairs"],
    },
    "table35_36_flips": {
        "notebook": "tab35_36_flips.ipynb",
        "inputs": ["table35_flips", "table36_failure_mechanism"],
        "figure": False,
        "tables": ["table35_flips", "table36_failure_mechanism"],
    },
    "table37_top_combinations": {
        "notebook": "tab37_top_combinations.ipynb",
        "inputs": ["table37_top_combinations"],
        "figure": False,
        "tables": ["table37_top_combinations"],
    },
    "fig4_detection": {
        "notebook": "fig4_detection.ipynb",
        "inputs": ["fig4_detection"],
    },
    "fig5_action_types": {
        "notebook": "fig5_action_types.ipynb",
        "inputs": ["fig5_action_types"],
    },
    "fig6_dimensions": {
        "notebook": "fig6_dimensions.ipynb",
        "inputs": ["fig6_dimensions"],
    },
    "fig8_cells": {
        "notebook": "fig8_cells.ipynb",
        "inputs": ["fig8_cells"],
    },
}

# Optional experiments beyond the paper, rendered when their switch is on. Kept apart from REPORTS (the
# paper's figures and tables, which tests/core/test_notebooks_degenerate.py renders on its synthetic panels);
# the family's manifest merges both. The composed-mechanisms notebook is tested in tests/aura/test_composed.py.
EXPERIMENT_REPORTS = {
    "composed_interaction": {
        "notebook": "fig_composed_interaction.ipynb",
        "inputs": ["composed_interaction"],
        "tables": ["composed_interaction"],
        "needs": lambda config: bool(section(config)["construct"]["composed"]["enabled"]),
    },
    # open-ended rollouts (aura.evaluate.open_ended); the notebook is tested in tests/aura/test_open_ended.py
    "open_ended_rollouts": {
        "notebook": "open_ended_rollouts.ipynb",
        "inputs": ["open_ended_rates", "open_ended_episode_labels"],
        "tables": ["open_ended_rates"],
        "needs": lambda config: bool(_evaluate(config)["open_ended"]["enabled"]),
    },
}

# The reproduction report (docs/reproducing.md): the paper's numbers beside the run's, the paper checked against
# itself. Kept apart from REPORTS like the experiments (it reads the reproduce stage's CSVs, not the panels);
# tested in tests/aura/test_aura_reproduction.py.
REPRODUCTION_REPORTS = {
    "reproduction": {
        "notebook": "reproduction.ipynb",
        "inputs": ["reproduction", "reproduction_consistency"],
        "tables": ["reproduction", "reproduction_consistency"],
    },
}
