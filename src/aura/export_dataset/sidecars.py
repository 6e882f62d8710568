"""The construction provenance of a config, read from the sidecars (``<file>.prov.json``) of its files.

A file pattern may hold wildcards (``{reviewer}``): every file it matches is read. A file without a
sidecar is listed as such (a hand-made or copied file), never an error; a sidecar that is not JSON is.
"""
from __future__ import annotations

import glob
import json
import re
from pathlib import Path
from typing import Any

from ..provenance import sidecar_path
from . import ExportError

WILDCARD = re.compile(r"\{[^{}]+\}")


def expand(pattern: str) -> list[Path]:
    """The existing files a layout pattern names (wildcards matched against the disk), sorted."""
    if not WILDCARD.search(pattern):
        return [Path(pattern)] if Path(pattern).is_file() else []
    return sorted(Path(p) for p in glob.glob(WILDCARD.sub("*", pattern)) if Path(p).is_file())


def read_sidecar(path: Path) -> dict | None:
    side = sidecar_path(path)
    if not side.is_file():
        return None
    try:
        data = json.loads(side.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ExportError(f"{side}: cannot read the provenance sidecar: {' '.join(str(exc).split())}") from None
    if not isinstance(data, dict):
        raise ExportError(f"{side}: a provenance sidecar is a JSON object")
    return data


def collect(patterns: list[str]) -> dict[str, Any]:
    """Prompts (ref -> path, sha256), models (name -> model id, endpoint), and one entry per file (stage,
    rows, git revision, config hash, when written; or "no sidecar") over every file the patterns match."""
    prompts: dict[str, dict] = {}
    models: dict[str, dict] = {}
    files: list[dict] = []
    seen: set[Path] = set()
    for pattern in patterns:
        for path in expand(pattern):
            if path in seen:
                continue
            seen.add(path)
            prov = read_sidecar(path)
            if prov is None:
                files.append({"file": str(path), "sidecar": False})
                continue
            for ref, p in sorted((prov.get("prompts") or {}).items()):
                prompts[ref] = {"path": p.get("path"), "sha256": p.get("sha256")}
            for name, m in sorted((prov.get("models") or {}).items()):
                models[name] = {"model_id": m.get("model_id"), "endpoint": m.get("endpoint")}
            git = prov.get("git") or {}
            files.append({"file": str(path), "sidecar": True, "stage": prov.get("stage"), "rows": prov.get("rows"),
                          "git_revision": git.get("revision"), "git_dirty": git.get("dirty"),
                          "config_hash": prov.get("config_hash"),
                          "created_at": (prov.get("run") or {}).get("created_at")})
    return {"prompts": dict(sorted(prompts.items())), "models": dict(sorted(models.items())), "files": files}
