"""PaSBench's config section and the models it evaluates, as every module of the family reads them."""
from __future__ import annotations

from aura.config import family_section


def section(raw: dict) -> dict:
    """``pasbench:`` of a config, defaults filled once the config is validated."""
    return family_section(raw, "pasbench")


def evaluated(raw: dict) -> list[str]:
    return list(section(raw).get("evaluated") or [])
