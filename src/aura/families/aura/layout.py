"""Where every AURA stage output lives (merged with the other families' layouts by
aura.pipeline.layout.layout, which the Snakefile and `aura estimate` read).

Patterns keep Snakemake wildcards ({model}, {judge}, {reviewer}, {shard}) unformatted.
"""
from __future__ import annotations

# Outputs of the paper-stats stage (src/aura/families/aura/stats/tables.py), one CSV each.
PAPER_STATS = ["judged", "table31_bootstrap", "table32_matched_pairs", "table33_overall", "table34_case_study", "table35_flips",
               "table36_failure_mechanism", "table37_top_combinations", "fig4_detection", "fig5_action_types",
               "fig6_dimensions", "fig8_cells"]


def layout(raw: dict) -> dict[str, str]:
    i, p, r = raw["paths"]["interim"], raw["paths"]["processed"], raw["paths"]["results"]
    return {
        "seeds": f"{i}/seeds.jsonl",
        "tags": f"{i}/tags.jsonl",
        "prefixes": f"{i}/prefixes.jsonl",
        "relevance": f"{i}/relevance.jsonl",
        "variations": f"{i}/variations.jsonl",
        "variation_review": f"{i}/variation_reviews/{{reviewer}}.jsonl",
        "classified": f"{i}/classified.jsonl",
        "pairs": f"{i}/pairs.jsonl",
        "pair_review": f"{i}/pair_reviews/{{reviewer}}.jsonl",
        "dataset": f"{p}/dataset.jsonl",
        "exclusions": f"{p}/exclusions.jsonl",
        "datacard": f"{p}/DATACARD.md",
        "construction_composition": f"{r}/stats/construction_composition.csv",
        "construction_funnel": f"{r}/stats/construction_funnel.csv",
        "leak_probe": f"{i}/leak_probe.jsonl",
        "leak_probe_summary": f"{r}/stats/leak_probe.csv",
        "rollouts": f"{r}/rollouts/{{model}}/shard{{shard}}.jsonl",
        "judgments": f"{r}/judgments/{{model}}/{{judge}}/shard{{shard}}.jsonl",
        "panel": f"{r}/panel/{{model}}.jsonl",
        "model_rates": f"{r}/stats/model_rates.csv",
        **{name: f"{r}/stats/{name}.csv" for name in PAPER_STATS},
        "format_sample": f"{r}/format/sample.jsonl",
        "format_rollouts": f"{r}/format/rollouts/{{model}}.jsonl",
        "format_judgments": f"{r}/format/judgments/{{model}}/{{judge}}.jsonl",
        "format_panel": f"{r}/format/panel/{{model}}.jsonl",
        "table38_prompt_format": f"{r}/stats/table38_prompt_format.csv",
        # open-ended rollouts (aura.evaluate.open_ended; aura.families.aura.evaluate.open_ended, aura.families.aura.stats.open_ended)
        "open_ended_episodes": f"{r}/open_ended/episodes/{{model}}.jsonl",
        "open_ended_step_items": f"{r}/open_ended/steps/{{model}}.items.jsonl",
        "open_ended_step_rollouts": f"{r}/open_ended/steps/{{model}}.rollouts.jsonl",
        "open_ended_judgments": f"{r}/open_ended/judgments/{{model}}/{{judge}}.jsonl",
        "open_ended_panel": f"{r}/open_ended/panel/{{model}}.jsonl",
        "open_ended_episode_labels": f"{r}/stats/open_ended_episodes.csv",
        "open_ended_rates": f"{r}/stats/open_ended_rates.csv",
        "judge_reliability": f"{r}/stats/judge_reliability.csv",
        "table3_human_validation": f"{r}/stats/table3_human_validation.csv",
        "table21_22_judge_accuracy": f"{r}/stats/table21_22_judge_accuracy.csv",
        "table23_ensembles": f"{r}/stats/table23_ensembles.csv",
        "validation_judgments": f"{r}/validation/judgments/{{model}}/{{judge}}.jsonl",
        "validation_sample": f"{r}/validation/sample.jsonl",
        "table18_validation_retention": f"{r}/stats/table18_validation_retention.csv",
        "table19_validation_strata": f"{r}/stats/table19_validation_strata.csv",
        "consistency_sample": f"{r}/consistency/sample.jsonl",
        "repeat_judgments": f"{r}/consistency/judgments/{{model}}/{{judge}}/run{{run}}/shard{{shard}}.jsonl",
        "table25_judge_consistency": f"{r}/stats/table25_judge_consistency.csv",
        "vendor_sample": f"{r}/vendor_overlap/sample.jsonl",
        "replacement_judgments": f"{r}/vendor_overlap/judgments/{{model}}/shard{{shard}}.jsonl",
        "table24_vendor_overlap": f"{r}/stats/table24_vendor_overlap.csv",
        # composed mechanisms (aura.construct.composed; aura.families.aura.construct.composed, aura.families.aura.stats.composed)
        "composed_variations": f"{i}/composed/variations.jsonl",
        "composed_review": f"{i}/composed/reviews/{{reviewer}}.jsonl",
        "composed_classified": f"{i}/composed/classified.jsonl",
        "composed_dataset": f"{i}/composed/dataset.jsonl",
        "composed_rollouts": f"{r}/composed/rollouts/{{model}}.jsonl",
        "composed_judgments": f"{r}/composed/judgments/{{model}}/{{judge}}.jsonl",
        "composed_panel": f"{r}/composed/panel/{{model}}.jsonl",
        "composed_interaction": f"{r}/stats/composed_interaction.csv",
        # the reproduction report (aura.families.aura.stats.reproduction): verdicts and the paper's own findings
        "reproduction": f"{r}/stats/reproduction.csv",
        "reproduction_consistency": f"{r}/stats/reproduction_consistency.csv",
    }
