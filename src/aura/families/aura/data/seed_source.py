"""Where the AURA family reads its seed trajectories: a local R-Judge-layout folder (`paths.seeds`) or
a pinned archive fetched into `aura.seed_download.dest` (aura.fetch.fetch_archive)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from aura.fetch import fetch_archive

from ..settings import section


def ensure_seed_dir(path: str | None, url: str | None, dest: Path, lock_file: Path,
                    subdir: str | None) -> Path:
    """The R-Judge seed folder: the local ``path`` if it exists, else the archive at ``url``
    fetched into ``dest`` (see :func:`fetch_archive`)."""
    if path:
        p = Path(path).expanduser()
        if p.exists():
            if not p.is_dir():
                raise ValueError(f"seed path {p} exists but is not a directory "
                                 "(expected <Domain>/*.json folders)")
            return p
    if url:
        return fetch_archive(url, Path(dest), Path(lock_file), subdir=subdir)
    if path:
        raise ValueError(f"seed path {path} does not exist and no download URL is configured; "
                         "point the path at an R-Judge data folder or set a pinned archive URL")
    raise ValueError("no R-Judge seed source configured: give a local path to a folder of "
                     "<Domain>/*.json files or a pinned archive URL (e.g. "
                     "https://github.com/<owner>/<repo>/archive/<commit>.tar.gz) with a subdir")


def seed_download(raw: dict[str, Any]) -> dict[str, Any] | None:
    """The config's ``aura.seed_download`` section when a download is configured and enabled, else None
    (a config sets ``aura: {seed_download: {enabled: false}}`` to read its own copy at ``paths.seeds``)."""
    spec = section(raw).get("seed_download")
    return spec if spec and spec.get("enabled", True) else None


def seed_folder(raw: dict[str, Any]) -> str:
    """The folder the seeds are read from: ``seed_download.dest`` when a download is configured
    and enabled, else ``paths.seeds``."""
    spec = seed_download(raw)
    return spec["dest"] if spec else raw["paths"]["seeds"]
