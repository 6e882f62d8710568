"""Where every stage output lives: the merge of every registered family's layout (enabled or not, so a
key always resolves). The Snakefile and `aura estimate` both read this one map.

Patterns keep Snakemake wildcards ({model}, {judge}, {reviewer}, {shard}) unformatted.
"""
from __future__ import annotations

from ..families import merged

# Where every family's rendered reports go: figures (pdf + png) and tables (csv + md).
SHARED = ("figures", "tables")


def layout(raw: dict) -> dict[str, str]:
    """layout key -> path pattern over all families, plus the shared report folders; a key two families
    define (or a family defines a shared one) is an error."""
    keys = merged("layout key", lambda family: family.layout(raw))
    taken = [k for k in SHARED if k in keys]
    if taken:
        raise ValueError(f"layout key '{taken[0]}' is the core's (the report folders); a family cannot define it")
    return {**keys, "figures": raw["paths"]["figures"], "tables": f"{raw['paths']['results']}/tables"}
