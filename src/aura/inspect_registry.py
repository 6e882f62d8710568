"""The families' Inspect AI tasks, as Inspect sees them: `inspect eval aura/<task>`.

Inspect imports this module through the entry point ``[project.entry-points.inspect_ai] aura = ...``, and it
does so for any Inspect run (it loads every entry point when it builds a model), so this module stays cheap:
it asks the family registry for every manifest with an ``inspect_tasks`` hook (``"module:TASKS"``, a dict of
task name -> task factory) and registers, under ``aura/<name>``, a thin factory per task WITHOUT importing the
family's task module (and the pandas / scipy / MCP stack behind it): the task names are read from the
module's source, where ``TASKS`` is a dict literal with string keys. Only when a task is called is its module
imported and the family's factory run (the thin factory then takes that factory's signature, so the log's
task arguments are the real ones). A module whose ``TASKS`` is not such a literal is imported here instead.

Inspect prefixes a task's name with its package only when the package lies in site-packages; an editable
install of this project does not, so the prefix is given here when Inspect did not add it.
"""
from __future__ import annotations

import ast
import inspect as pyinspect
from importlib.util import find_spec

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


def _source_tasks(target: str) -> dict[str, ast.FunctionDef | None] | None:
    """task name -> its factory's definition in the module (None when not a plain def there), read from the
    source of `target`'s module without importing it; None when ``TASKS`` is not a literal dict of names."""
    module, _, attribute = target.partition(":")
    spec = find_spec(module)
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        return None
    try:
        with open(spec.origin, encoding="utf-8") as f:
            tree = ast.parse(f.read(), spec.origin)
    except (OSError, SyntaxError):
        return None
    defs = {n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        if any(isinstance(t, ast.Name) and t.id == attribute for t in targets):
            value = node.value
            if not isinstance(value, ast.Dict) or not all(isinstance(k, ast.Constant) and isinstance(k.value, str)
                                                          for k in value.keys):
                return None
            return {k.value: defs.get(v.id) if isinstance(v, ast.Name) else None
                    for k, v in zip(value.keys, value.values)}
    return None


def _signature(node: ast.FunctionDef | None) -> pyinspect.Signature:
    """The parameter names of a factory's definition (keyword arguments; defaults unknown until imported)."""
    if node is None:
        return pyinspect.Signature([pyinspect.Parameter("task_args", pyinspect.Parameter.VAR_KEYWORD)])
    names = [a.arg for a in (*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs)]
    params = [pyinspect.Parameter(n, pyinspect.Parameter.KEYWORD_ONLY, default=None) for n in names]
    if node.args.kwarg is not None:
        params.append(pyinspect.Parameter(node.args.kwarg.arg, pyinspect.Parameter.VAR_KEYWORD))
    return pyinspect.Signature(params)


def thin_factory(target: str, name: str, node: ast.FunctionDef | None = None):
    """A task factory that imports `target`'s module only when called, then runs its factory `name`."""

    def factory(**task_args):
        real = load_target(target)[name]
        factory.__signature__ = pyinspect.signature(real)  # what Inspect records as the task's arguments
        return real(**task_args)

    factory.__name__ = factory.__qualname__ = name
    factory.__doc__ = f"{target}[{name!r}] (imported when the task is built)"
    factory.__signature__ = _signature(node)
    return factory


def register_all() -> dict[str, object]:
    """Every family's tasks, registered; registered name -> task function. Two families giving one task
    name is an error."""
    found: dict[str, object] = {}
    for family in all_families():
        if not family.inspect_tasks:
            continue
        names = _source_tasks(family.inspect_tasks)
        factories = ({n: thin_factory(family.inspect_tasks, n, node) for n, node in names.items()}
                     if names is not None else load_target(family.inspect_tasks))
        for name, factory in factories.items():
            if name in found:
                raise ValueError(f"Inspect task '{name}' of family '{family.name}' is already defined")
            found[name] = _register(name, factory)
    return {registry_info(fn).name: fn for fn in found.values()}


TASKS = register_all()
