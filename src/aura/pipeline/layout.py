"""Where every stage output lives. The Snakefile and `aura estimate` both read this one map.

Patterns keep Snakemake wildcards ({model}, {judge}, {reviewer}, {shard}) unformatted.
"""
from __future__ import annotations

from ..config import REPO_ROOT

PROMPTS_DIR = REPO_ROOT / "prompts"
NOTEBOOKS_DIR = REPO_ROOT / "notebooks"


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
        "rollouts": f"{r}/rollouts/{{model}}/shard{{shard}}.jsonl",
        "judgments": f"{r}/judgments/{{model}}/{{judge}}/shard{{shard}}.jsonl",
        "panel": f"{r}/panel/{{model}}.jsonl",
        "model_rates": f"{r}/stats/model_rates.csv",
        "figures": raw["paths"]["figures"],
        "tables": f"{r}/tables",
    }
