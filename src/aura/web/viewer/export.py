"""The static site: the served viewer's pages pre-rendered into one folder (flat files, relative links).

Rendering starts at the index and the tables page; every page a rendered page links to (a list page of a
filter, its next page, an item) is rendered in turn until none is left, so every link resolves and only
linked lists are written. Filters and search need the server; the export has the lists the index and the
tables link to (each family, each model, each Table 33 cell), paginated.
The folder is written next to the target and renamed into place, so a failed export leaves nothing half-written.
"""
from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from .app import STATIC
from .data import RunData
from .pages import Links, Pages


def export_site(data: RunData, out: Path | str) -> int:
    """Write the site to `out` (replaced); returns the number of pages written."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    links = Links(static=True)
    pages = Pages(data, links)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        written = {"index.html": pages.index()}
        if data.has_tables:
            written["tables.html"] = pages.tables()
        for name, html in written.items():
            (tmp / name).write_text(html, encoding="utf-8")
        done = set(written)
        while True:
            todo = [n for n in links.pending if n not in done]
            if not todo:
                break
            for name in todo:
                kind, family, arg = links.pending[name]
                html = pages.rows(family, arg) if kind == "rows" else pages.item(family, arg)
                if html is None:
                    raise RuntimeError(f"static export: nothing to render for {kind} {family} {arg}")
                (tmp / name).write_text(html, encoding="utf-8")
                done.add(name)
        shutil.copytree(STATIC, tmp / "static")
        if out.exists():
            shutil.rmtree(out)
        tmp.rename(out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return len(done)
