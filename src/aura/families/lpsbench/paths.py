"""LPS-Bench's files: every layout key of the family and the path it names under the run's folders (the
manifest hands `layout` to the core; the data module reads the generated cases' folder from it)."""
from __future__ import annotations

# The stats stage's CSVs (`--out <name>`), layout key lpsbench_stats_<name>
STATS = ("safe_rate_by_risk", "safe_rate_by_domain", "mitigation")
# Per (model, variant) outputs (layout key lpsbench_<name>); an episode row embeds its execution record
PER_RUN = ("episodes", "evaluations")


def layout(raw: dict) -> dict[str, str]:
    i, r = raw["paths"]["interim"], raw["paths"]["results"]
    pi, pr = f"{i}/lpsbench", f"{r}/lpsbench"
    return {
        "lpsbench_cases": f"{pi}/cases.jsonl",
        "lpsbench_excluded": f"{pi}/excluded.jsonl",  # cases whose upstream tool module is broken, with the reason
        **{f"lpsbench_{name}": f"{pr}/{name}/{{variant}}/{{model}}.jsonl" for name in PER_RUN},
        **{f"lpsbench_stats_{name}": f"{pr}/stats/{name}.csv" for name in STATS},
        "lpsbench_reproduction": f"{pr}/reproduction.csv",  # the reproduce stage: verdicts, the paper's own findings
        "lpsbench_reproduction_consistency": f"{pr}/reproduction_consistency.csv",
        "lpsbench_generate_drafts": f"{pi}/generate/drafts.jsonl",
        "lpsbench_generate_exclusions": f"{pi}/generate/exclusions.jsonl",
        "lpsbench_generate_reviews": f"{pi}/generate/reviews.jsonl",
        "lpsbench_generate_feedback": f"{pi}/generate/feedback.jsonl",
        "lpsbench_generated_cases": f"{pi}/generated",  # a folder <domain>/<RISK>_<n>.json
    }
