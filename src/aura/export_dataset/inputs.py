"""What a family's export reads: produced JSONL files (one line per problem, naming the file), the
provenance sidecar of one, the pin of a configured archive download (url, commit, recorded sha256), and
whether a folder is the family's own demo data (whose licence the family states)."""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from ..io import read_jsonl
from ..resources import same_places
from . import ExportError
from .sidecars import read_sidecar

COMMIT = re.compile(r"\b[0-9a-f]{40}\b")


def read_rows(path: str | Path, what: str) -> list[dict]:
    """The rows of a produced JSONL file; missing or unreadable: ExportError naming it and `what` it is."""
    path = Path(path)
    if not path.is_file():
        raise ExportError(f"{path}: {what} not found (build it with the workflow first, or leave the family out "
                          "with --families)")
    try:
        rows = list(read_jsonl(path))
    except (OSError, ValueError) as exc:
        raise ExportError(" ".join(str(exc).split())) from None
    bad = next((n for n, r in enumerate(rows, 1) if not isinstance(r, dict)), None)
    if bad:
        raise ExportError(f"{path}: row {bad} is not a JSON object")
    return rows


def is_demo(folder: str | Path | None, family) -> bool:
    """Whether `folder` is one of the family's own demo-data folders (its manifest's ``demo_data``), where a checkout
    keeps them or, for an installed wheel, at the same place in the working folder (the reproduction stage's rule,
    aura.resources.same_places)."""
    if folder is None:
        return False
    return Path(folder).resolve() in same_places(family.demo_data)


def sidecar(path: str | Path) -> dict:
    """The file's provenance sidecar, {} when it has none."""
    return read_sidecar(Path(path)) or {}


def download_pin(spec: dict[str, Any] | None) -> dict[str, Any]:
    """A configured archive download as the card states it: url, commit (read from the url), subfolder and
    the archive's sha256 when its lock file records one; {} for no download."""
    if not spec:
        return {}
    url = spec.get("url")
    commit = COMMIT.search(url or "")
    sha = None
    lock = Path(spec["lock"]) if spec.get("lock") else None
    if lock is not None and lock.is_file():
        try:
            entries = json.loads(lock.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            entries = []
        for entry in entries if isinstance(entries, list) else [entries]:
            if isinstance(entry, dict) and entry.get("url") == url:
                sha = entry.get("sha256")
    return {"url": url, "commit": commit.group(0) if commit else None, "subdir": spec.get("subdir"),
            "archive_sha256": sha or "not recorded (no download yet)"}
