"""AURA's figure/table manifest: report name -> its notebook (notebooks/aura/) and the produced files
(layout keys) it reads; the caption is report/aura/<name>.rst. `snakemake figures/<name>.pdf` re-renders
one of them from those files, with no model call. `needs` names a config condition
(aura.pipeline.rules_support.report_enabled) under which an optional analysis renders.
"""
from __future__ import annotations


def validation_sample_on(config: dict) -> bool:
    """Tables 18-19 render when the config draws a human-validation sample."""
    return bool(config["evaluate"]["validation_models"])


REPORTS = {
    "fig7_detection_levels": {
        "notebook": "notebooks/aura/fig7_detection_levels.ipynb",
        "inputs": ["fig4_detection"],
    },
    "table34_case_study": {
        "notebook": "notebooks/aura/tab34_case_study.ipynb",
        "inputs": ["table34_case_study"],
        "figure": False,
        "tables": ["table34_case_study"],
    },
    "table38_prompt_format": {
        "notebook": "notebooks/aura/tab38_prompt_format.ipynb",
        "inputs": ["table38_prompt_format"],
        "figure": False,
        "tables": ["table38_prompt_format"],
        "needs": "format_models",
    },
    "judge_reliability": {
        "notebook": "notebooks/aura/tab_judge_reliability.ipynb",
        "inputs": ["judge_reliability"],
        "figure": False,
        "tables": ["judge_reliability"],
    },
    "table3_human_validation": {
        "notebook": "notebooks/aura/tab3_human_validation.ipynb",
        "inputs": ["table3_human_validation"],
        "figure": False,
        "tables": ["table3_human_validation"],
        "needs": "human_labels",
    },
    "table25_judge_consistency": {
        "notebook": "notebooks/aura/tab25_judge_consistency.ipynb",
        "inputs": ["table25_judge_consistency"],
        "figure": False,
        "tables": ["table25_judge_consistency"],
        "needs": "consistency_models",
    },
    "table21_22_judge_accuracy": {
        "notebook": "notebooks/aura/tab21_22_judge_accuracy.ipynb",
        "inputs": ["table21_22_judge_accuracy"],
        "figure": False,
        "tables": ["table21_judge_accuracy", "table22_judge_accuracy_by_consensus"],
        "needs": "human_labels",
    },
    "table23_ensembles": {
        "notebook": "notebooks/aura/tab23_ensembles.ipynb",
        "inputs": ["table23_ensembles"],
        "figure": False,
        "tables": ["table23_ensembles"],
        "needs": "validation_judges",
    },
    "table18_validation_retention": {
        "notebook": "notebooks/aura/tab18_validation_retention.ipynb",
        "inputs": ["table18_validation_retention"],
        "figure": False,
        "tables": ["table18_validation_retention"],
        "needs": validation_sample_on,
    },
    "table19_validation_strata": {
        "notebook": "notebooks/aura/tab19_validation_strata.ipynb",
        "inputs": ["table19_validation_strata"],
        "figure": False,
        "tables": ["table19_validation_strata"],
        "needs": validation_sample_on,
    },
    "table24_vendor_overlap": {
        "notebook": "notebooks/aura/tab24_vendor_overlap.ipynb",
        "inputs": ["table24_vendor_overlap"],
        "figure": False,
        "tables": ["table24_vendor_overlap"],
        "needs": "vendor_overlap",
    },
    "construction_funnel": {
        "notebook": "notebooks/aura/construction_counts.ipynb",
        "inputs": ["construction_composition", "construction_funnel"],
        "tables": ["construction_composition", "construction_funnel"],
    },
    "unsafe_rates": {
        "notebook": "notebooks/aura/fig_unsafe_rates.ipynb",
        "inputs": ["model_rates"],
    },
    "table33_overall": {
        "notebook": "notebooks/aura/tab33_overall.ipynb",
        "inputs": ["table33_overall"],
        "figure": False,
        "tables": ["table33_overall"],
    },
    "table31_bootstrap": {
        "notebook": "notebooks/aura/tab31_bootstrap.ipynb",
        "inputs": ["table31_bootstrap"],
        "figure": False,
        "tables": ["table31_bootstrap"],
    },
    "table32_matched_pairs": {
        "notebook": "notebooks/aura/tab32_matched_pairs.ipynb",
        "inputs": ["table32_matched_pairs"],
        "figure": False,
        "tables": ["table32_matched_pairs"],
    },
    "table35_36_flips": {
        "notebook": "notebooks/aura/tab35_36_flips.ipynb",
        "inputs": ["table35_flips", "table36_failure_mechanism"],
        "figure": False,
        "tables": ["table35_flips", "table36_failure_mechanism"],
    },
    "table37_top_combinations": {
        "notebook": "notebooks/aura/tab37_top_combinations.ipynb",
        "inputs": ["table37_top_combinations"],
        "figure": False,
        "tables": ["table37_top_combinations"],
    },
    "fig4_detection": {
        "notebook": "notebooks/aura/fig4_detection.ipynb",
        "inputs": ["fig4_detection"],
    },
    "fig5_action_types": {
        "notebook": "notebooks/aura/fig5_action_types.ipynb",
        "inputs": ["fig5_action_types"],
    },
    "fig6_dimensions": {
        "notebook": "notebooks/aura/fig6_dimensions.ipynb",
        "inputs": ["fig6_dimensions"],
    },
    "fig8_cells": {
        "notebook": "notebooks/aura/fig8_cells.ipynb",
        "inputs": ["fig8_cells"],
    },
}

# Optional experiments beyond the paper, rendered when their switch is on. Kept apart from REPORTS (the
# paper's figures and tables, which tests/test_notebooks_degenerate.py renders on its synthetic panels);
# the family's manifest merges both. The composed-mechanisms notebook is tested in tests/test_composed.py.
EXPERIMENT_REPORTS = {
    "composed_interaction": {
        "notebook": "notebooks/aura/fig_composed_interaction.ipynb",
        "inputs": ["composed_interaction"],
        "tables": ["composed_interaction"],
        "needs": lambda config: bool(config["construct"]["composed"]["enabled"]),
    },
    # open-ended rollouts (evaluate.open_ended); the notebook is tested in tests/test_open_ended.py
    "open_ended_rollouts": {
        "notebook": "notebooks/aura/open_ended_rollouts.ipynb",
        "inputs": ["open_ended_rates", "open_ended_episode_labels"],
        "tables": ["open_ended_rates"],
        "needs": lambda config: bool(config["evaluate"]["open_ended"]["enabled"]),
    },
}
