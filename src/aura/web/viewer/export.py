"""The static site: the served viewer's pages pre-rendered into one folder (flat files, relative links).

Rendering starts at the index and the tables page; every page a rendered page links to (a list page of a
filter, its next page, an item) is rendered in turn until none is left, so every link resolves and only
linked lists are written. Filters and search need the server; the export has the lists the index and the
tables link to (each family, each model, each count of a table), paginated, and a copy of each file a page
shows (`media/<n>/...`, from the run's media folders).
The folder is written next to the target and renamed into place, so a failed export leaves nothing half-written.
An existing target is replaced only when it is an earlier export (it holds the MARKER file) or an empty folder:
anything else is refused with one line, never deleted.
"""
from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from ...config import UserError
from .app import STATIC
from .data import RunData
from .pages import Links, Pages

MARKER = ".aura-viewer-export"


class ExportTargetError(UserError):
    pass


def check_target(out: Path) -> None:
    """Refuse a target that exists and is not an earlier export (or an empty folder)."""
    if not out.exists():
        return
    if not out.is_dir() or out.resolve() == Path.cwd().resolve() or not (
            (out / MARKER).is_file() or not any(out.iterdir())):
        raise ExportTargetError(f"{out}: exists and is not an earlier viewer export (no {MARKER} in it); "
                                f"choose a new folder or remove it yourself")


def export_site(data: RunData, out: Path | str) -> int:
    """Write the site to `out` (replaced when it is an earlier export); returns the number of pages written
    (the copied media files not counted)."""
    out = Path(out)
    check_target(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    links = Links.of(data, static=True)
    pages = Pages(data, links)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        written = {"index.html": pages.index()}
        if pages.sections:
            written["tables.html"] = pages.tables()
        for name, html in written.items():
            (tmp / name).write_text(html, encoding="utf-8")
        done, copied = set(written), 0
        while True:
            todo = [n for n in links.pending if n not in done]
            if not todo:
                break
            for name in todo:
                kind, family, arg = links.pending[name]
                done.add(name)
                if kind == "media":
                    (tmp / name).parent.mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(arg, tmp / name)
                    copied += 1
                    continue
                html = pages.rows(family, arg) if kind == "rows" else pages.item(family, arg)
                if html is None:
                    raise RuntimeError(f"static export: nothing to render for {kind} {family} {arg}")
                (tmp / name).write_text(html, encoding="utf-8")
        shutil.copytree(STATIC, tmp / "static")
        (tmp / MARKER).write_text("written by `python -m aura view --export`; replaced by the next export\n")
        tmp.chmod(0o755)  # mkdtemp made it 0700
        if out.exists():
            shutil.rmtree(out)
        tmp.rename(out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return len(done) - copied
