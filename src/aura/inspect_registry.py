"""The families' Inspect AI tasks, as Inspect sees them: `inspect eval aura/<task>`.

Inspect imports this module through the entry point ``[project.entry-points.inspect_ai] aura = ...``. It
asks the family registry for every manifest with an ``inspect_tasks`` hook, imports that module (only
now: no workflow job imports Inspect) and registers each of its task factories under ``aura/<name>``.

Inspect prefixes a task's name with its package only when the package lies in site-packages; an editable
install of this project does not, so the prefix is given here when Inspect did not add it.
"""
from __future__ import annotations

from inspect_ai import task
from inspect_ai.util import registry_info

from .families import all_families
from .families.base import load_target

NAMESPACE = "aura"


def _register(name: str, factory):
    registered = task(name=name)(factory)
    if registry_info(registered).name == f"{NAMESPACE}/{name}":
        return registered
    return task(name=f"{NAMESPACE}/{name}")(factory)


def register_all() -> dict[str, object]:
    """Every family's tasks, registered; registered name -> task function. Two families giving one task
    name is an error."""
    found: dict[str, object] = {}
    for family in all_families():
        if not family.inspect_tasks:
            continue
        for name, factory in load_target(family.inspect_tasks).items():
            if name in found:
                raise ValueError(f"Inspect task '{name}' of family '{family.name}' is already defined")
            found[name] = _register(name, factory)
    return {registry_info(fn).name: fn for fn in found.values()}


TASKS = register_all()
