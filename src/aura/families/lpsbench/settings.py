"""LPS-Bench's config section, as every module of the family reads it."""
from __future__ import annotations

from aura.config import family_section


def section(raw: dict) -> dict:
    """``lpsbench:`` of a config, defaults filled once the config is validated."""
    return family_section(raw, "lpsbench")
