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

from ..core_commands import CORE_COMMANDS
from ..errors import UserError
from .base import Family, Stage  # noqa: F401 - re-exported for manifests

GROUP = "aura.families"
# Names the core uses itself: no family may take them as its name (config sections), nor a core command's name
# (aura.core_commands) as a stage or command.
CORE_KEYS = frozenset({"name", "seed", "families", "paths", "endpoints", "models", "estimate", "llm", "extends"})


class FamilyError(UserError):
    """A family that cannot be registered or used (broken manifest, clashing names): one line, no traceback."""


@lru_cache(maxsize=None)
def _entry_points() -> dict:
    found = {}
    for ep in entry_points(group=GROUP):
        found.setdefault(ep.name, ep)  # the first distribution on sys.path wins, as Python's imports do
    # Python does not define the order of entry points: a manifest's `order` (then its name) fixes it
    return {ep.name: ep for ep in sorted(found.values(), key=lambda ep: (_manifest(ep).order, ep.name))}


def _manifest(ep):
    try:
        family = ep.load()
    except Exception as exc:  # noqa: BLE001 - a broken plugin is named in one line, whatever it raised
        raise FamilyError(f"family '{ep.name}' ({ep.value}) cannot be loaded: {type(exc).__name__}: {exc}") from None
    if not isinstance(family, Family):
        raise FamilyError(f"entry point {ep.name} = {ep.value}: not a Family manifest")
    if family.name != ep.name:
        raise FamilyError(f"entry point {ep.name} = {ep.value}: FAMILY.name is '{family.name}'")
    if family.name in CORE_KEYS:
        raise FamilyError(f"family '{family.name}': the name is a shared config key of the core")
    taken = sorted((set(family.stages) | set(family.commands)) & set(CORE_COMMANDS))
    if taken:
        raise FamilyError(f"family '{family.name}' ({ep.value}): its stage or command '{taken[0]}' is a command of the "
                          f"core (python -m aura {taken[0]}); rename it")
    return family


def names() -> list[str]:
    """Every registered family's name."""
    return list(_entry_points())


@lru_cache(maxsize=None)
def load(name: str) -> Family:
    points = _entry_points()
    if name not in points:
        raise FamilyError(f"unknown family '{name}' (registered: {', '.join(points) or 'none'}; a family is a package "
                         f"with an entry point in the group '{GROUP}')")
    return _manifest(points[name])


def all_families() -> list[Family]:
    return [load(name) for name in names()]


def enabled(raw: dict) -> list[Family]:
    """The families `raw["families"]` names (default: every registered family), in that order."""
    chosen = raw.get("families")
    return [load(name) for name in (names() if chosen is None else chosen)]


def tool_roles(raw: dict) -> frozenset[str]:
    """The roles whose calls offer tools, over the enabled families."""
    return frozenset().union(*(family.tool_roles for family in enabled(raw)))


def merged(part: str, values_of, families: list[Family] | None = None) -> dict:
    """Merge one dict-valued part over every family (default: all registered); a key two families share
    is an error naming both."""
    out, owner = {}, {}
    for family in all_families() if families is None else families:
        for key, value in values_of(family).items():
            if key in out:
                raise FamilyError(f"{part} '{key}' is defined by both family '{owner[key]}' and '{family.name}'")
            out[key], owner[key] = value, family.name
    return out


def check_names() -> None:
    """Every registered family loads and no two define one stage, command, report, prompt or path key
    (FamilyError, one line, naming both)."""
    families = all_families()
    for part, values_of in (("stage", lambda f: f.stages), ("command", lambda f: f.commands),
                            ("report", lambda f: f.reports), ("prompt", lambda f: f.prompts),
                            ("paths key", lambda f: f.paths_schema)):
        merged(part, values_of, families)


def family_of_stage(name: str) -> Family:
    for family in all_families():
        if name in family.stages:
            return family
    raise KeyError(f"no family has a stage named '{name}'")


def distribution(name: str) -> dict[str, str | None]:
    """The installed distribution a family's entry point comes from (importlib.metadata): its name and version
    (None where the entry point has no distribution, e.g. one made by hand)."""
    dist = _entry_points()[name].dist if name in _entry_points() else None
    return {"distribution": dist.name if dist else None, "version": dist.version if dist else None}


@lru_cache(maxsize=None)
def code_sha256(name: str) -> str | None:
    """sha256 over the Python files of the package a family's manifest lies in (relative path and bytes, in path
    order): a plugin edited in place, whose version stays, still names the code that ran. None without a folder."""
    import hashlib
    from importlib.util import find_spec
    from pathlib import Path

    spec = find_spec(_entry_points()[name].module) if name in _entry_points() else None
    if spec is None or not spec.origin:
        return None
    folder = Path(spec.origin).parent
    digest = hashlib.sha256()
    for path in sorted(folder.rglob("*.py")):
        digest.update(str(path.relative_to(folder)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


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
