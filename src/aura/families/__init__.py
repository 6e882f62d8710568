"""The registry of benchmark families, found through the entry-point group ``aura.families``.

Every installed package that declares ``[project.entry-points."aura.families"] <name> =
"<package.module>:FAMILY"`` is a family; the built-in ones (aura, pasbench, lpsbench) register the same
way in this repository's pyproject.toml. `load(name)` reads one manifest, `enabled(raw)` the families
the config's `families:` key turns on (default: every registered family, ordered by the manifests'
`order`, then by name), `merged` one part over several families. The registry
knows no family by name; it only reads what the entry points say.
"""
from __future__ import annotations

from functools import lru_cache
from importlib.metadata import entry_points

from .base import Family, Stage  # noqa: F401 - re-exported for manifests

GROUP = "aura.families"


@lru_cache(maxsize=None)
def _entry_points() -> dict:
    found = {}
    for ep in entry_points(group=GROUP):
        found.setdefault(ep.name, ep)  # the first distribution on sys.path wins, as Python's imports do
    # Python does not define the order of entry points: a manifest's `order` (then its name) fixes it
    return {ep.name: ep for ep in sorted(found.values(), key=lambda ep: (_manifest(ep).order, ep.name))}


def _manifest(ep):
    family = ep.load()
    if not isinstance(family, Family):
        raise ValueError(f"entry point {ep.name} = {ep.value}: not a Family manifest")
    if family.name != ep.name:
        raise ValueError(f"entry point {ep.name} = {ep.value}: FAMILY.name is '{family.name}'")
    return family


def names() -> list[str]:
    """Every registered family's name."""
    return list(_entry_points())


@lru_cache(maxsize=None)
def load(name: str) -> Family:
    points = _entry_points()
    if name not in points:
        raise ValueError(f"unknown family '{name}' (registered: {', '.join(points) or 'none'}; a family is a package "
                         f"with an entry point in the group '{GROUP}')")
    return _manifest(points[name])


def all_families() -> list[Family]:
    return [load(name) for name in names()]


def enabled(raw: dict) -> list[Family]:
    """The families `raw["families"]` names (default: every registered family), in that order."""
    chosen = raw.get("families")
    return [load(name) for name in (names() if chosen is None else chosen)]


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


def family_of_prompt(name: str) -> Family:
    for family in all_families():
        if name in family.prompts:
            return family
    raise KeyError(name)
