"""Which optional-dependency group (extra) of aura-eval a missing module belongs to, read from the installed
package's own metadata: an Inspect-only install (`pip install aura-eval`) that runs a workflow command gets one line
naming the extra to install, not a traceback."""
from __future__ import annotations

import re
from importlib.metadata import PackageNotFoundError, requires

DISTRIBUTION = "aura-eval"
_EXTRA = re.compile(r"""extra\s*==\s*["']([^"']+)["']""")


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def extra_of(module: str) -> str | None:
    """The extra whose requirement installs `module` (its top-level name, compared as a distribution name), or None
    where no extra names it (a base dependency, or an install without metadata)."""
    try:
        reqs = requires(DISTRIBUTION) or []
    except PackageNotFoundError:
        return None
    top = _normal(module.split(".")[0])
    for req in reqs:
        name = _normal(re.split(r"[\s;<>=!~\[(]", req, maxsplit=1)[0])
        found = _EXTRA.search(req)
        if name == top and found and found.group(1) != "all":
            return found.group(1)
    return None


def missing_extra_line(exc: ModuleNotFoundError) -> str | None:
    """One line for a module an extra installs ("... pip install 'aura-eval[workflow]'"), None for any other."""
    extra = extra_of(exc.name or "")
    if extra is None:
        return None
    return (f"this command needs the module '{exc.name}', which the '{extra}' extra installs: "
            f"pip install 'aura-eval[{extra}]' (or bash scripts/bootstrap.sh for everything)")
