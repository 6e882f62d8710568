"""The package's import graph, read from the code, and its two rules: no circle, no import upward.

Every import counts, those inside functions (lazy ones) included, and so does a package's lazy name (PEP 562: a
`__getattr__` that imports a submodule named by a string, as `aura.llm` does for `LLMClient`): a package's
edges to its own submodules stay in the graph, so a circle that runs through a package's lazy names is seen.
`from . import x` where x is a submodule is an edge to x alone (the package's `__init__` ran before the module
did); where x is a name the package's `__init__` defines, it is an edge to the package, and a package whose
`__init__` imports that module again is a circle (a family's manifest and a helper module of it, say).

The layers of the core, lowest first; a module imports its own layer and those below, never one above. The
families (aura.families.<name>) stand above all of them and are checked by test_boundary.py.
"""
from __future__ import annotations

import ast

from test_boundary import PACKAGE, _sources, family_of, imports_of

LAYERS = (  # (layer, module prefixes); a core module no prefix names is in "work"
    ("base", ("aura.errors", "aura.io", "aura.redact", "aura.resources", "aura.provider_rules", "aura.core_commands")),
    # the config, the prompts, the family registry with its manifest types and a stage's declaration
    ("config", ("aura.config", "aura.prompts", "aura.families", "aura.pipeline.stage")),
    ("llm", ("aura.llm",)),
    ("work", ()),  # the stage plumbing, estimate, preflight, statistics, viewer, exports
    ("entry", ("aura.cli", "aura.commands", "aura.serve_jobs", "aura.__main__")),
)


def layer_of(module: str) -> int:
    hits = [(len(prefix), i) for i, (_, prefixes) in enumerate(LAYERS) for prefix in prefixes
            if module == prefix or module.startswith(prefix + ".")]
    return max(hits)[1] if hits else 3


def lazy_names(source: str, package: str) -> set[str]:
    """The submodules a package's PEP 562 `__getattr__` imports by name: the strings ".name" of its __init__."""
    tree = ast.parse(source)
    if not any(isinstance(node, ast.FunctionDef) and node.name == "__getattr__" for node in tree.body):
        return set()
    return {package + node.value for node in ast.walk(tree) if isinstance(node, ast.Constant)
            and isinstance(node.value, str) and node.value.startswith(".") and node.value[1:].isidentifier()}


def import_graph(sources: dict) -> dict[str, set[str]]:
    graph = {}
    for module, (path, text) in sources.items():
        package = path.name == "__init__.py"
        found = imports_of(text, module, package, set(sources)) | (lazy_names(text, module) if package else set())
        graph[module] = {t for t in found if t in sources and t != module}
    return graph


def circles(graph: dict[str, set[str]]) -> list[str]:
    state, found = {}, []

    def visit(node, stack):
        state[node] = "open"
        for nxt in sorted(graph[node]):
            if state.get(nxt) == "open":
                found.append(" -> ".join(stack[stack.index(nxt):] + [nxt]))
            elif nxt not in state:
                visit(nxt, stack + [nxt])
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    return found


def upward(graph: dict[str, set[str]]) -> list[str]:
    return sorted(f"{m} ({LAYERS[layer_of(m)][0]}) imports {t} ({LAYERS[layer_of(t)][0]})"
                  for m, targets in graph.items() if family_of(m) is None
                  for t in targets if family_of(t) is None and layer_of(t) > layer_of(m))


def test_the_import_graph_has_no_circle():
    assert circles(import_graph(_sources())) == []


def test_no_core_module_imports_a_higher_layer():
    assert upward(import_graph(_sources())) == []


def test_a_circle_through_a_lazy_import_and_a_packages_lazy_name_is_seen():
    """A package whose __getattr__ loads `.client` by name, the client importing a module inside a function, and
    that module importing the package: the circle today's checks must see (and `from . import x` is no circle)."""
    planted = {
        "aura.lazy": (PACKAGE / "lazy" / "__init__.py",
                      "import importlib\n_WHERE = {'Client': '.client'}\n\ndef __getattr__(name):\n"
                      "    return getattr(importlib.import_module(_WHERE[name], __name__), name)\n"),
        "aura.lazy.client": (PACKAGE / "lazy" / "client.py",
                             "from . import helper\n\ndef gate():\n    from ..planted_up import message\n"
                             "    return message\n"),
        "aura.lazy.helper": (PACKAGE / "lazy" / "helper.py", "X = 1\n"),
        "aura.planted_up": (PACKAGE / "planted_up.py", "from .lazy import Client\nmessage = Client\n"),
    }
    assert circles(import_graph(planted)) == ["aura.lazy -> aura.lazy.client -> aura.planted_up -> aura.lazy"]
    planted["aura.llm.gate"] = (PACKAGE / "llm" / "gate.py", "def f():\n    from ..preflight import gate\n")
    planted["aura.preflight"] = (PACKAGE / "preflight.py", "X = 1\n")
    assert upward(import_graph(planted)) == ["aura.llm.gate (llm) imports aura.preflight (work)"]


def test_a_circle_between_a_package_and_a_module_that_takes_a_name_of_its_init_is_seen():
    """A family's manifest (its __init__) importing a helper module inside a function, the helper taking a function
    of the manifest: a circle. The helper taking a sibling module (`from . import helper`) is none."""
    planted = {
        "aura.fam": (PACKAGE / "fam" / "__init__.py", "def section(raw):\n    return raw\n\ndef check(raw):\n"
                     "    from . import roster\n    return roster.problems(raw)\n"),
        "aura.fam.roster": (PACKAGE / "fam" / "roster.py", "from . import section, helper\n"),
        "aura.fam.helper": (PACKAGE / "fam" / "helper.py", "X = 1\n"),
    }
    assert circles(import_graph(planted)) == ["aura.fam -> aura.fam.roster -> aura.fam"]
    planted["aura.fam.roster"] = (PACKAGE / "fam" / "roster.py", "from . import helper\n")
    assert circles(import_graph(planted)) == []
