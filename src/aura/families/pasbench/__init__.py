"""The PaSBench family: proactive risk detection on text observation logs and images (first version of
the manifest; its stages, reports and targets are filled in as the family's modules land)."""
from __future__ import annotations

from ..base import Family, Stage


STAGES: dict[str, Stage] = {}
REPORTS: dict[str, dict] = {}


def layout(raw: dict) -> dict[str, str]:
    i, r = raw["paths"]["interim"], raw["paths"]["results"]
    pi, pr = f"{i}/pasbench", f"{r}/pasbench"
    return {
        "pasbench_items": f"{pi}/items.jsonl",
        "pasbench_responses": f"{pr}/responses/{{model}}.jsonl",
        "pasbench_judgments": f"{pr}/judgments/{{model}}.jsonl",
        "pasbench_knowledge": f"{pr}/knowledge/{{model}}.jsonl",
        "pasbench_reactive": f"{pr}/reactive/{{model}}.jsonl",
        "pasbench_verified": f"{pr}/verified/{{model}}.jsonl",
        **{f"pasbench_stats_{name}": f"{pr}/stats/{name}.csv"
           for name in ("rates", "k_curves", "knowledge", "reactive", "pearson_models", "pearson_samples",
                        "word_length", "image_count", "severity", "propose_verify")},
    }


def targets(config: dict) -> list[str]:
    return []


FAMILY = Family(name="pasbench", title="PaSBench: proactive safety risk detection on text logs and images",
                stages=STAGES, layout=layout, reports=REPORTS, targets=targets)
