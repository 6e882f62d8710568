"""`llm.require_preflight`: where a preflight's result lies and whether it passed, read by the LLM layer before
its first remote call and written by `python -m aura preflight` (aura.preflight), which sits above the layer."""
from __future__ import annotations

import json
from pathlib import Path

from ..config import Config


def record_path(config: Config) -> Path:
    return Path(config.paths["logs"]) / "preflight" / f"{config.hash[:16]}.json"


def passed(config: Config) -> bool:
    """Whether a preflight of this config (same hash) has passed."""
    try:
        return bool(json.loads(record_path(config).read_text(encoding="utf-8")).get("passed"))
    except (OSError, ValueError):
        return False


def gate_message(config: Config) -> str | None:
    """With ``llm.require_preflight: true`` and no passing preflight of this config: the one line that stops
    the job before its first remote call; else None."""
    if not (config.raw.get("llm") or {}).get("require_preflight") or passed(config):
        return None
    return (f"llm.require_preflight: no passing preflight of this config (hash {config.hash[:16]}, "
            f"{record_path(config)}): run `python -m aura preflight --configfile <the same config file, with the same "
            f"overrides>` first; nothing was sent")
