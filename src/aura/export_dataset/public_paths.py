"""What the export shows of a run's files: their paths without the folders of the machine that ran it.

A file under one of the run's configured folders (the config's ``paths:``: interim, processed, seeds, ...) is
named by that folder's key, ``{interim}/<family>/items.jsonl``; a file of the repository by its path in the
repository (``prompts/<family>/p1.md``); anything else by its file name. The card and the Croissant record hold
no other path.
"""
from __future__ import annotations

from pathlib import Path

from ..config import REPO_ROOT


def public_path(path: str | Path | None, config) -> str | None:
    """`path` as the export names it (None and "" stay as they are); a relative path is read from the working
    folder, as the run read it."""
    if path is None or str(path) == "":
        return path
    p = Path(path).resolve()
    roots = sorted(((key, Path(folder).resolve()) for key, folder in config.paths.items()
                    if isinstance(folder, str) and folder), key=lambda kv: len(kv[1].parts), reverse=True)
    for key, root in roots:
        if p.is_relative_to(root) and root != Path(root.anchor):
            rest = p.relative_to(root).as_posix()
            return f"{{{key}}}" + ("" if rest == "." else f"/{rest}")
    if p.is_relative_to(REPO_ROOT):
        return p.relative_to(REPO_ROOT).as_posix()
    return p.name
