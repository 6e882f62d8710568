"""The one path for every LLM call: registry, client, cache, retries, local server, accounting.

The names below load on first use (PEP 562): a job that makes no model call (stats, a figure's render)
imports neither the client nor the ``openai`` package it needs (1.6 s of a job's start-up, measured with
``python -X importtime``).
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .cache import Cache, cache_key
    from .client import LLMClient, LLMRequest, LLMResult

_WHERE = {"LLMClient": ".client", "LLMRequest": ".client", "LLMResult": ".client", "Cache": ".cache",
          "cache_key": ".cache"}
__all__ = list(_WHERE)


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(importlib.import_module(_WHERE[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
