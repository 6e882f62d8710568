"""Stage select_seeds: load an R-Judge-layout folder, keep attack_type == unintended, cap if configured."""
from __future__ import annotations

from ..data.rjudge import counts, load_rjudge, select_unintended
from ..data.trajectory import steps_of
from ..pipeline.context import StageContext


def run(ctx: StageContext) -> None:
    records = load_rjudge(ctx.inputs["seeds_dir"])
    selected = select_unintended(records)
    cap = ctx.config.raw["construct"]["max_seeds"]
    if cap is not None:
        selected = selected[:cap]
    rows = [
        {
            "seed_id": r.seed_id,
            "domain": r.domain,
            "source_file": r.source_file,
            "source_label": r.label,
            "scenario": r.scenario,
            "profile": r.profile,
            "risk_description": r.risk_description,
            "steps": steps_of(r),
        }
        for r in selected
    ]
    ctx.write("seeds", rows, counts_all=counts(records), counts_selected=counts(selected))
