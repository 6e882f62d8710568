"""Where every stage output lives: the merge of every registered family's layout (enabled or not, so a
key always resolves). The Snakefile and `aura estimate` both read this one map.

Patterns keep Snakemake wildcards ({model}, {judge}, {reviewer}, {shard}) unformatted.
"""
from __future__ import annotations

from ..families import merged


def layout(raw: dict) -> dict[str, str]:
    """layout key -> path pattern over all families; a key two families define is an error."""
    return merged("layout key", lambda family: family.layout(raw))
