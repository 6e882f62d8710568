"""Content-addressed response cache.

One file per entry, ``<root>/<k[:2]>/<k>.json``, written by temp file + rename. Many Snakemake
jobs may read and write at once: a rename is atomic, two writers of one key write the same
content, and there is no shared index to lock. Entries never expire. Only complete responses
are stored (the caller decides; errors and timeouts never reach the cache).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..io import atomic_write_text, canonical_json, sha256_text

# What is in the key, and nothing else: retries, timeouts and concurrency never change an answer.
KEY_FIELDS = ("endpoint", "model", "messages", "params", "response_format", "tools", "sample_index")


def cache_key(
    *,
    endpoint: str,
    model: str,
    messages: list[dict],
    params: dict[str, Any],
    response_format: dict | None,
    tools: list | None,
    sample_index: int,
) -> str:
    payload = {
        "endpoint": endpoint,
        "model": model,
        "messages": messages,
        "params": params,
        "response_format": response_format,
        "tools": tools,
        "sample_index": sample_index,
    }
    return sha256_text(canonical_json(payload))


class Cache:
    def __init__(self, root: str | Path, enabled: bool = True):
        self.root = Path(root)
        self.enabled = enabled

    def path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict | None:
        if not self.enabled:
            return None
        try:
            text = self.path(key).read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        try:
            return json.loads(text)
        except json.JSONDecodeError:
            return None  # cannot happen with atomic writes; treat a foreign file as a miss

    def contains(self, key: str) -> bool:
        return self.enabled and self.path(key).exists()

    def put(self, key: str, entry: dict) -> None:
        if self.enabled:
            atomic_write_text(self.path(key), json.dumps(entry, ensure_ascii=False))
