"""Stage select_seeds: load an R-Judge-layout folder, keep attack_type == unintended, cap if configured."""
from __future__ import annotations

from pathlib import Path

from aura.errors import UserError
from aura.fetch import FetchError, fetch_archive
from aura.pipeline.context import StageContext

from ..data.rjudge import DOMAINS, counts, load_rjudge, select_unintended
from ..data.seed_counts import SeedCountError, check_seed_counts, check_seed_dir
from ..data.seed_source import seed_download
from ..data.trajectory import steps_of
from ..settings import check_case_study_seed


def _alternate_labels(records: list, safe_first: bool) -> list:
    """File order, but unsafe (label 1) and safe (label 0) records taken in turn."""
    unsafe = [r for r in records if getattr(r, "label", 1) == 1]
    safe = [r for r in records if getattr(r, "label", 1) != 1]
    turns = (safe, unsafe) if safe_first else (unsafe, safe)
    out = []
    for i in range(max(len(unsafe), len(safe))):
        out += [x[i] for x in turns if i < len(x)]
    return out


def spread_over_domains(records: list, cap: int) -> list:
    """A small subset that still covers every domain and both source labels: round-robin over
    domains, and within a domain unsafe and safe records in turn (file order otherwise). Domains
    start with a safe and an unsafe record in turn (the first with a safe one), so that even one
    record per domain covers both labels."""
    by_domain: dict[str, list] = {}
    for r in records:
        by_domain.setdefault(r.domain, []).append(r)
    order = [d for d in DOMAINS if d in by_domain] + sorted(set(by_domain) - set(DOMAINS))
    by_domain = {d: _alternate_labels(by_domain[d], safe_first=j % 2 == 0) for j, d in enumerate(order)}
    picked, i = [], 0
    while len(picked) < min(cap, len(records)):
        for d in order:
            if i < len(by_domain[d]) and len(picked) < cap:
                picked.append(by_domain[d][i])
        i += 1
    return picked


def run(ctx: StageContext) -> None:
    records = load_rjudge(ctx.inputs["seeds_dir"])
    try:  # the paper's counts (config seed_counts), for a download and a user's own copy alike
        check_seed_counts(records, ctx.config.raw["aura"].get("seed_counts"), ctx.inputs["seeds_dir"])
    except SeedCountError as exc:
        raise UserError(str(exc)) from None
    selected = select_unintended(records)
    cap = ctx.config.raw["aura"]["construct"]["max_seeds"]
    if cap is not None:
        selected = spread_over_domains(selected, cap)
    check_case_study_seed(ctx.config.raw, [r.seed_id for r in selected], [r.seed_id for r in records])  # Table 34
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


def fetch(ctx: StageContext) -> None:
    """Download `seed_download.url` into its dest (checksum pinned in the lock file)."""
    spec = seed_download(ctx.config.raw)
    if not spec:
        raise UserError("the config has no enabled aura.seed_download section")
    expected = ctx.config.raw["aura"].get("seed_counts")
    try:  # what was unpacked must hold the expected counts before it is installed
        fetch_archive(spec["url"], Path(spec["dest"]), Path(spec["lock"]), spec.get("subdir"),
                      check=lambda d: check_seed_dir(d, expected))
    except (ValueError, FetchError) as exc:  # checksum, counts, unreadable or unsafe archive
        raise UserError(str(exc)) from None
