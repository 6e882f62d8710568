"""The family boundary, read from the code (every import, lazy ones inside functions included):

- the core (src/aura outside src/aura/families/<name>/) imports no family module;
- the core holds no family's names: no string in its code equals a family's stage name, layout key, report
  name or prompt name, and no identifier or string of it names a family;
- families never import each other.

The import graph's own rules (no circle, no import upward) are test_import_graph.py's.

`boundary_problems` is the checker; the last test feeds it a core module that imports a family, so the
check is seen to fail when the boundary is crossed.
"""
from __future__ import annotations

import ast
from pathlib import Path

from aura.families import all_families

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


def family_names() -> set[str]:
    """Every name a registered family owns: stage names, layout keys, report names, prompt names."""
    names = set()
    for family in all_families():
        names |= set(family.stages) | set(family.layout({"paths": {k: k for k in (
            "interim", "processed", "results", "figures", "cache", "logs")}})) | set(family.reports) | set(family.prompts)
    return names


def _strings(tree: ast.AST) -> list[str]:
    """String constants of the code, docstrings left out."""
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                  and node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
    return [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
            and id(n) not in docstrings]


def boundary_problems(sources: dict[str, tuple[Path, str]], owned: set[str], families: set[str]) -> list[str]:
    problems = []
    for module, (path, text) in sorted(sources.items()):
        mine = family_of(module)
        for target in sorted(imports_of(text, module, path.name == "__init__.py")):
            other = family_of(target)
            if other and mine is None:
                problems.append(f"core module {module} imports family module {target}")
            elif other and mine and other != mine:
                problems.append(f"family {mine} ({module}) imports family {other} ({target})")
        if mine is None:
            tree = ast.parse(text)
            for s in _strings(tree):
                if s in owned:
                    problems.append(f"core module {module} names the family name '{s}'")
            words = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} | {
                n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)} | set(_strings(tree))
            for word in words:
                hit = [f for f in families if f != "aura" and f in word.lower()]
                if hit:
                    problems.append(f"core module {module} mentions family '{hit[0]}' ({word!r})")
    return problems


def test_the_core_names_no_family_and_families_do_not_import_each_other():
    families = {f.name for f in all_families()}
    assert {"aura", "pasbench", "lpsbench"} <= families
    assert boundary_problems(_sources(), family_names(), families) == []


def test_the_check_fails_when_a_core_module_imports_a_family():
    planted = {"aura.pipeline.leak": (PACKAGE / "pipeline" / "leak.py",
                                      "def f():\n    from ..families.pasbench import stats\n    return stats\n"),
               "aura.llm.named": (PACKAGE / "llm" / "named.py", "STAGE = 'paper-stats'\nif lpsbench_on:\n    pass\n")}
    problems = boundary_problems(planted, family_names(), {f.name for f in all_families()})
    assert "core module aura.pipeline.leak imports family module aura.families.pasbench" in problems
    assert "core module aura.llm.named names the family name 'paper-stats'" in problems
    assert "core module aura.llm.named mentions family 'lpsbench' ('lpsbench_on')" in problems


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
