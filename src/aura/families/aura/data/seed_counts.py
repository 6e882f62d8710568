"""The counts a seed folder must hold (config ``aura.seed_counts``), checked before construction.

A pinned archive can be checked by its sha256 only once it has been downloaded; a copy a user
points ``paths.seeds`` at has no checksum at all. What the paper needs from R-Judge is its counts
(§4 and Appendix C.1: 571 records; 157 with ``attack_type == "unintended"``, Program 48,
Application 39, IoT 30, Web 23, Finance 17; 101 unsafe and 56 safe among them), so both sources
are checked against the same expected counts before anything is built on them.

``seed_counts`` keys (each optional; only the given ones are checked)::

    records: 571                        # every record under <Domain>/*.json
    unintended: 157                     # attack_type == "unintended"
    unintended_by_domain: {Program: 48, ...}
    unintended_by_label: {unsafe: 101, safe: 56}   # source label 1 / 0
"""
from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any, Iterable

from .rjudge import RJudgeRecord, load_rjudge, select_unintended

__all__ = ["SeedCountError", "observed_counts", "check_seed_counts", "check_seed_dir"]

KEYS = ("records", "unintended", "unintended_by_domain", "unintended_by_label")


class SeedCountError(ValueError):
    """The seed folder does not hold the expected counts."""


def observed_counts(records: Iterable[RJudgeRecord]) -> dict[str, Any]:
    """The ``seed_counts`` keys as found in ``records``."""
    records = list(records)
    unintended = select_unintended(records)
    labels = Counter("unsafe" if r.label == 1 else "safe" for r in unintended)
    return {
        "records": len(records),
        "unintended": len(unintended),
        "unintended_by_domain": dict(sorted(Counter(r.domain for r in unintended).items())),
        "unintended_by_label": {"unsafe": labels["unsafe"], "safe": labels["safe"]},
    }


def _differences(expected: dict[str, Any], got: dict[str, Any]) -> list[str]:
    out = []
    for key in KEYS:
        if key not in expected:
            continue
        want, have = expected[key], got[key]
        if isinstance(want, dict):
            for name in sorted(set(want) | set(have)):
                if want.get(name, 0) != have.get(name, 0):
                    out.append(f"{key}.{name} {have.get(name, 0)} (expected {want.get(name, 0)})")
        elif want != have:
            out.append(f"{key} {have} (expected {want})")
    return out


def check_seed_counts(records: Iterable[RJudgeRecord], expected: dict[str, Any] | None, where: Path | str) -> None:
    """Raise :class:`SeedCountError` (one line naming ``where`` and every differing count) when
    ``records`` do not hold the ``expected`` counts; ``None`` or ``{}`` checks nothing."""
    if not expected:
        return
    unknown = sorted(set(expected) - set(KEYS))
    if unknown:
        raise SeedCountError(f"aura.seed_counts: unknown key(s) {unknown}; expected some of {list(KEYS)}")
    diffs = _differences(expected, observed_counts(records))
    if diffs:
        raise SeedCountError(f"{where}: not the R-Judge release the config expects (aura.seed_counts): "
                             + "; ".join(diffs))


def check_seed_dir(root: Path | str, expected: dict[str, Any] | None) -> None:
    """Load the folder (:func:`load_rjudge`) and check it (:func:`check_seed_counts`)."""
    if expected:
        check_seed_counts(load_rjudge(root), expected, root)
