"""The registry of benchmark families. Adding a family is one line here (plus its schema enum entry).

`load(name)` imports the family's manifest (``FAMILY`` in the named module); `enabled(raw)` lists the
families the config's `families:` key turns on (default: all, in the order given). Merged views over
every family (stages, layout, reports) live in aura.pipeline.registry / layout / rules_support.
"""
from __future__ import annotations

from functools import lru_cache
from importlib import import_module

from .base import Family, Stage  # noqa: F401 - re-exported for manifests

FAMILIES: dict[str, str] = {
    "aura": "aura.families.aura",
    "pasbench": "aura.families.pasbench",
    "lpsbench": "aura.families.lpsbench",
}


@lru_cache(maxsize=None)
def load(name: str) -> Family:
    if name not in FAMILIES:
        raise ValueError(f"unknown family '{name}' (known: {', '.join(FAMILIES)})")
    family = import_module(FAMILIES[name]).FAMILY
    if family.name != name:
        raise ValueError(f"{FAMILIES[name]}: FAMILY.name is '{family.name}', registered as '{name}'")
    return family


def all_families() -> list[Family]:
    return [load(name) for name in FAMILIES]


def enabled(raw: dict) -> list[Family]:
    """The families `raw["families"]` names (default: every registered family), in that order."""
    names = raw.get("families")
    return [load(name) for name in (list(FAMILIES) if names is None else names)]


def merged(part: str, values_of, families: list[Family] | None = None) -> dict:
    """Merge one dict-valued part over every family (default: all registered); a key two families share
    is an error naming both."""
    out, owner = {}, {}
    for family in all_families() if families is None else families:
        for key, value in values_of(family).items():
            if key in out:
                raise ValueError(f"{part} '{key}' is defined by both family '{owner[key]}' and '{family.name}'")
            out[key], owner[key] = value, family.name
    return out


def family_of_report(name: str) -> Family:
    for family in all_families():
        if name in family.reports:
            return family
    raise KeyError(f"no family has a report named '{name}'")
