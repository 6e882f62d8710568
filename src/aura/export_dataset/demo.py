"""Whether an export is the benchmark or a demo of the chain.

An export is the benchmark only when the run's config is the paper's (``paper.yaml``, or a config that
``extends`` it, as the single-benchmark paper configs do) and no family's release says its rows
came from the family's demo data or an embedded model (``Release.demo``, which the families take from
`aura.stats.reproduction.demo_reason`: what keeps a smoke run from getting reproduction verdicts). Anything
else says, in its title and the card's first line, that it is a demo, not the benchmark.
"""
from __future__ import annotations

from pathlib import Path

import yaml

from .card import short_title

PAPER_CONFIG = "paper.yaml"  # the paper's config file (config/paper.yaml); its extensions are paper runs too
DEMO_PREFIX = "DEMO, not the benchmark: "


def extends_chain(configfile: str | Path) -> list[Path]:
    """The config file and the files it extends, nearest first (load_config has read them already, so they
    exist, are mappings and hold no cycle)."""
    chain: list[Path] = []
    path: Path | None = Path(configfile)
    while path is not None and path.resolve() not in [p.resolve() for p in chain]:
        chain.append(path)
        raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        base = raw.get("extends") if isinstance(raw, dict) else None
        path = path.parent / base if base else None
    return chain


def reasons(configfile: str | Path, releases: list) -> list[str]:
    """Why the export is not the benchmark, one line each; [] for a paper-config run of the benchmark."""
    out = []
    if not any(p.name == PAPER_CONFIG for p in extends_chain(configfile)):
        out.append(f"the run's config `{Path(configfile).name}` is not the paper's (`{PAPER_CONFIG}` or a config "
                   "extending it)")
    out += [f"{short_title(r)}: {r.demo}" for r in releases if r.demo]
    return out


def title(name: str, why: list[str]) -> str:
    return DEMO_PREFIX + name if why else name


def banner(why: list[str]) -> str:
    """The card's first line for a demo export ("" for the benchmark)."""
    if not why:
        return ""
    return ("**This export is a demo, not the benchmark**: " + "; ".join(why) + ". Its rows only show that the "
            "chain runs end to end; do not report results on them or take them for the published benchmark.\n")
