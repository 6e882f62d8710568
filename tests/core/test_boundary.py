"""The family boundary, read from the code (every import, lazy ones inside functions included):

- the core (src/aura outside src/aura/families/<name>/) imports no family module;
- families never import each other;
- no module, identifier or string of the core names a built-in family (pasbench, lpsbench: a `pasbench_x.py`,
  a `lpsbench_on` flag, a `load("pasbench")` would all tie the core to one family). The family `aura` is left
  out of that name check: it shares its name with the package.

The family names checked are those of the folders under src/aura/families/, never the registry's: an installed
plugin may be named after any word the core uses ("batch", "judge", "refusal") without failing this test
(tests/plugin/test_plugin_names.py runs it with such a plugin registered). A word in a docstring is no tie.

The import graph's own rules (no circle, no import upward) are test_import_graph.py's.

`boundary_problems` is the checker; a test feeds it planted core modules that cross the boundary (an import,
a module name, an identifier, a string), so each check is seen to fail when the boundary is crossed.
"""
from __future__ import annotations

import ast
from pathlib import Path

from aura.families import names

SRC = Path(__file__).resolve().parents[2] / "src"
PACKAGE = SRC / "aura"
FAMILIES_DIR = PACKAGE / "families"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def family_of(module: str) -> str | None:
    """The family a module belongs to (aura.families.<name>...), None for the core."""
    parts = module.split(".")
    if parts[:2] == ["aura", "families"] and len(parts) > 2 and (FAMILIES_DIR / parts[2]).is_dir():
        return parts[2]
    return None


def built_in_families() -> set[str]:
    """The families this repository carries: the packages under src/aura/families/ (the registry is not asked)."""
    return {p.name for p in FAMILIES_DIR.iterdir() if (p / "__init__.py").is_file()}


def imports_of(source: str, module: str, is_package: bool, modules: set[str] | frozenset = frozenset()) -> set[str]:
    """Every module `source` imports (absolute names; relative imports resolved). `from x import y` gives x.y
    where that is one of `modules` (a submodule), and x where some name it takes is not (a name x's own code
    defines); with no `modules` known, both."""
    here = module.split(".") if is_package else module.split(".")[:-1]
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = here[:len(here) - node.level + 1] if node.level else []
            target = ".".join([*base, *(node.module.split(".") if node.module else [])])
            names = {f"{target}.{alias.name}" for alias in node.names}
            found |= names
            if not modules or not names <= set(modules):
                found.add(target)
    return {name for name in found if name.split(".")[0] == "aura"}


def _sources() -> dict[str, tuple[Path, str]]:
    return {module_name(p): (p, p.read_text(encoding="utf-8")) for p in PACKAGE.rglob("*.py")}


def _strings(tree: ast.AST) -> list[str]:
    """String constants of the code, docstrings left out."""
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                  and node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
    return [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
            and id(n) not in docstrings]


def _identifiers(tree: ast.AST) -> set[str]:
    """The names the code binds or reads: variables, attributes, functions, classes, arguments, import aliases,
    keyword arguments."""
    found = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Name):
            found.add(n.id)
        elif isinstance(n, ast.Attribute):
            found.add(n.attr)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found.add(n.name)
        elif isinstance(n, ast.arg):
            found.add(n.arg)
        elif isinstance(n, ast.alias) and n.asname:
            found.add(n.asname)
        elif isinstance(n, ast.keyword) and n.arg:
            found.add(n.arg)
    return found


def boundary_problems(sources: dict[str, tuple[Path, str]], families: set[str]) -> list[str]:
    """What crosses the boundary in `sources` (module -> (path, text)), `families` being the built-in ones."""
    named = sorted(families - {"aura"})  # "aura" is the package's own name: every module would carry it
    problems = []
    for module, (path, text) in sorted(sources.items()):
        mine = family_of(module)
        for target in sorted(imports_of(text, module, path.name == "__init__.py")):
            other = family_of(target)
            if other and mine is None:
                problems.append(f"core module {module} imports family module {target}")
            elif other and mine and other != mine:
                problems.append(f"family {mine} ({module}) imports family {other} ({target})")
        if mine is not None:
            continue
        tree = ast.parse(text)
        for family in named:
            if family in module.lower():
                problems.append(f"core module {module} is named after family '{family}'")
            for kind, words in (("identifier", sorted(_identifiers(tree))), ("string", _strings(tree))):
                problems += [f"core module {module} mentions family '{family}' ({kind} {w!r})"
                             for w in words if family in w.lower()]
    return problems


def test_the_core_names_no_built_in_family_and_families_do_not_import_each_other():
    built_in = built_in_families()
    assert {"aura", "pasbench", "lpsbench"} <= built_in <= set(names()), (built_in, names())
    assert boundary_problems(_sources(), built_in) == []


def test_the_check_fails_when_the_core_crosses_the_boundary_and_not_for_a_word_a_plugin_may_take():
    """Each kind of crossing planted once; beside them a core module using the words a plugin family might be
    named after (refusal, judge, batch, stats), a family naming itself and a docstring naming a family: no problem."""
    def module(path: str, text: str) -> tuple[Path, str]:
        return PACKAGE / path, text

    planted = {
        "aura.pipeline.leak": module("pipeline/leak.py", "def f():\n    from ..families.pasbench import stats\n"),
        "aura.llm.named": module("llm/named.py", "if lpsbench_on:\n    pass\n"),
        "aura.stats.pasbench_rates": module("stats/pasbench_rates.py", "X = 1\n"),
        "aura.web.pick": module("web/pick.py", "from aura.families import load\nFAMILY = load('PaSBench')\n"),
        "aura.families.lpsbench.borrow": module("families/lpsbench/borrow.py", "import aura.families.pasbench.data"),
        "aura.llm.words": module("llm/words.py", '"""Unlike pasbench, this module is core."""\nSTOP = "refusal"\n'
                                 "def judge_batch(stats, judge='judge'):\n    return stats\n"),
        "aura.families.pasbench.own": module("families/pasbench/own.py", "pasbench_on = load('pasbench')\n"),
    }
    assert boundary_problems(planted, built_in_families()) == [
        "family lpsbench (aura.families.lpsbench.borrow) imports family pasbench (aura.families.pasbench.data)",
        "core module aura.llm.named mentions family 'lpsbench' (identifier 'lpsbench_on')",
        "core module aura.pipeline.leak imports family module aura.families.pasbench",
        "core module aura.pipeline.leak imports family module aura.families.pasbench.stats",
        "core module aura.stats.pasbench_rates is named after family 'pasbench'",
        "core module aura.web.pick mentions family 'pasbench' (string 'PaSBench')",
    ]


def shadowed_names(package: Path) -> list[str]:
    """Names a package's __init__ defines (def, class, assignment) that equal one of its submodules' names:
    importing that submodule later (a lazy `from .x import ...`) sets the package attribute to the module, and
    the package's own code then calls a module. A name the __init__ itself imports from that submodule is safe
    (the submodule is loaded before the name is bound)."""
    tree = ast.parse((package / "__init__.py").read_text(encoding="utf-8"))
    subs = {p.stem for p in package.glob("*.py") if p.stem != "__init__"} | {
        p.name for p in package.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    defined, safe = set(), set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defined.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                defined |= {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}
        elif isinstance(node, ast.ImportFrom) and node.level == 1 and node.module:
            safe |= {a.asname or a.name for a in node.names if a.name == node.module.split(".")[0]}
    return sorted((defined & subs) - safe)


def test_no_package_defines_a_name_one_of_its_submodules_would_replace():
    problems = {str(init.parent.relative_to(SRC)): names for init in PACKAGE.rglob("__init__.py")
                if (names := shadowed_names(init.parent))}
    assert problems == {}
