"""The viewer's pages as HTML strings, shared by the served app and the static export.

`Links` is the only thing that differs: served, a list is a filter URL (`/rows?family=f&model=m&...`)
and an item a path; exported, every page is a flat file in the site folder, linked relatively, and each
link made while rendering queues its target for the exporter (so the site has no dead link and only the
lists something links to). A file a page shows (an image) is linked only when it lies under one of the
run's media folders (`RunData.media`): `/media/<n>/<path>` served, `media/<n>/<path>` copied into an export.

Every page names the run (`run_title`: the config's name, else its families), carries the legend of the
families it shows (each part's `legend()`) and prints counts with gettext's `ngettext` (Jinja's i18n
extension, no translation installed: "1 row", "2 rows").

The frame's templates (base, macros, index, rows, tables) lie in this package; a family's templates in
its part's folder, named `<family>/<file>` here (`Pages.render_part`).
"""
from __future__ import annotations

import hashlib
import re
from pathlib import Path
from urllib.parse import quote, urlencode

from jinja2 import ChoiceLoader, Environment, FileSystemLoader, PackageLoader, PrefixLoader, select_autoescape
from markupsafe import Markup

from ...config import config_schema
from .data import RunData
from .part import ViewerPart
from .query import Searcher, options, query

LIST_PARAMS = ("axis", "q", "page")  # what a list URL holds besides the family's filters


def environment(parts: dict[str, ViewerPart]) -> Environment:
    loader = ChoiceLoader([PackageLoader("aura.web.viewer", "templates"),
                           PrefixLoader({name: FileSystemLoader(part.templates) for name, part in parts.items()})])
    env = Environment(loader=loader, autoescape=select_autoescape(["html"]), trim_blocks=True, lstrip_blocks=True,
                      extensions=["jinja2.ext.i18n"])
    env.install_null_translations(newstyle=True)  # ngettext("row", "rows", n): the singular for n == 1
    return env


def run_title(data: RunData) -> str:
    """What the pages call the run: its config's `name` unless left at the schema's default, else the titles
    of its families, joined by commas."""
    default = config_schema()["properties"]["name"].get("default")
    name = data.raw.get("name")
    return name if name and name != default else ", ".join(data.titles.values()) or "run"


def _safe(text: str) -> str:
    clean = re.sub(r"[^A-Za-z0-9_.=-]+", "_", text)
    if clean != text:
        clean += "-" + hashlib.sha256(text.encode()).hexdigest()[:8]
    return clean


class Links:
    """URLs of the viewer's pages; `static=True` gives relative file names and queues their targets.

    `filters`: family -> its filters (`RunData.filters`); a list URL keeps those, in that order, then
    `axis`, `q` and `page`. `media`: the folders whose files may be linked (`RunData.media`, resolved);
    `root`: what a relative file path is relative to (`RunData.root`)."""

    def __init__(self, filters: dict[str, tuple[str, ...]], static: bool = False, media: list[Path] = (),
                 root: Path = Path(".")):
        self.filters, self.static, self.media_folders, self.root = filters, static, list(media), root
        # file name -> ("rows", family, params) | ("item", family, key) | ("media", "", the file's path)
        self.pending: dict[str, tuple] = {}

    @classmethod
    def of(cls, data: RunData, static: bool = False) -> "Links":
        """The links of one run's pages."""
        return cls(data.filters, static=static, media=data.media, root=data.root)

    def rows(self, family: str, **params) -> str:
        order = (*self.filters.get(family, ()), *LIST_PARAMS)
        params = {k: str(params[k]) for k in order if params.get(k) not in (None, "")}
        if params.get("page") == "1":
            del params["page"]
        if not self.static:
            return "/rows?" + urlencode({"family": family, **params})
        page = params.pop("page", "1")
        params.pop("q", None)  # the static site has no search
        slug = "-".join(f"{k}={v}" for k, v in params.items())
        name = _safe(f"rows-{family}" + (f"-{slug}" if slug else "")) + f"-p{page}.html"
        self.pending.setdefault(name, ("rows", family, {**params, "page": page}))
        return name

    def item(self, family: str, key: str, model: str = "") -> str:
        anchor = f"#m-{_safe(model)}" if model else ""
        if self.static:
            name = f"{family}-{_safe(key)}.html"
            self.pending.setdefault(name, ("item", family, key))
            return name + anchor
        return f"/{family}/item/{quote(key, safe='')}{anchor}"

    def media(self, path: str) -> str | None:
        """The URL of a file a page shows, or None when it is missing or not under a media folder (then it is
        never served). Symbolic links are followed first: one pointing out of the folders is outside."""
        full = (self.root / path).resolve()
        for n, folder in enumerate(self.media_folders):
            if full.is_relative_to(folder) and full.is_file():
                rel = full.relative_to(folder).as_posix()
                if not self.static:
                    return f"/media/{n}/{quote(rel)}"
                name = f"media/{n}/{rel}"
                self.pending.setdefault(name, ("media", "", full))
                return quote(name)
        return None

    def home(self) -> str:
        return "index.html" if self.static else "/"

    def tables(self) -> str:
        return "tables.html" if self.static else "/tables"

    def css(self) -> str:
        return "static/viewer.css" if self.static else "/static/viewer.css"


class Pages:
    """Every page of one run. The families' tables sections are rendered once, here (they decide whether
    there is a tables page at all)."""

    def __init__(self, data: RunData, links: Links):
        self.data, self.links = data, links
        self.env = environment(data.parts)
        self.searcher = Searcher(data)
        self.titles = {**data.titles, **{name: part.title for name, part in data.parts.items()}}
        self.run_title = run_title(data)
        self.legends = {name: part.legend() for name, part in data.parts.items()}
        # a label chip's hover text: its meaning in the legends (macros.label), the first family's where two share it
        meanings: dict[str, str] = {}
        for legend in self.legends.values():
            for group in legend.values():
                for code, meaning in group.items():
                    meanings.setdefault(str(code), str(meaning))
        self.env.globals["meanings"] = meanings
        self._legend_html: dict[tuple[str, ...], Markup] = {}
        self.css = Markup(" ".join(part.css for part in data.parts.values() if part.css))  # code, not data
        self.sections: dict[str, str] = {}  # (empty while the sections render: they are no whole page)
        sections = {name: part.tables(self) for name, part in data.parts.items()}
        self.sections = {name: html for name, html in sections.items() if html is not None}
        for name, verdicts in data.reproductions.items():  # every family's reproduction report, the same way
            self.sections[f"{name}:reproduction"] = self._render("reproduction.html", family=name, verdicts=verdicts)

    def legend(self, families: tuple[str, ...]) -> Markup:
        """The legend of `families` (those with one), rendered once: every page of a family carries the same."""
        if families not in self._legend_html:
            groups = {f: self.legends[f] for f in families if self.legends.get(f)}
            self._legend_html[families] = Markup(
                self.env.get_template("legend.html").render(legend=groups, titles=self.titles) if groups else "")
        return self._legend_html[families]

    def _render(self, template: str, legend_of: list[str] | None = None, **ctx) -> str:
        """A template with what every page sees; the legend is that of the families `legend_of` (default all)."""
        legend = self.legend(tuple(self.data.families if legend_of is None else legend_of))
        return self.env.get_template(template).render(data=self.data, links=self.links, static=self.links.static,
                                                      titles=self.titles, anchor=_safe, css=self.css,
                                                      run_title=self.run_title, legend=legend,
                                                      has_tables=bool(self.sections), **ctx)

    def render_part(self, part: ViewerPart, template: str, **ctx) -> str:
        """One of a family's templates (a file in its part's `templates` folder), rendered with `ctx`
        and what every page sees (data, links, static, titles, anchor, css, run_title, has_tables, and the
        family's legend)."""
        return self._render(f"{part.name}/{template}", legend_of=[part.name], **ctx)

    def index(self) -> str:
        frames = {f: self.data.frames[f] for f in self.data.families}
        counts = {f: len(frame) for f, frame in frames.items()}
        models = {f: sorted(m for m in frame["model"].cat.categories if m) if "model" in frame else []
                  for f, frame in frames.items()}
        notes = [Markup(self.data.parts[f].tables_note) for f in self.sections
                 if f in self.data.parts and self.data.parts[f].tables_note]
        return self._render("index.html", counts=counts, models=models, notes=notes)

    def rows(self, family: str, params: dict) -> str | None:
        if family not in self.data.frames or self.data.frames[family].empty:
            return None
        part = self.data.parts[family]
        axis = params["axis"] if params.get("axis") in part.axes else part.axis
        try:
            page_no = int(params.get("page") or 1)
        except ValueError:
            page_no = 1
        filters = {k: params.get(k, "") for k in part.filters}
        page = query(self.data, family, filters, q=params.get("q", ""), axis=axis, page=page_no, searcher=self.searcher)
        current = {k: v for k, v in filters.items() if v}
        current.update({k: params[k] for k in ("axis", "q") if params.get(k)})
        rows_template = f"{family}/{part.rows_template}" if part.rows_template else "part_rows.html"
        return self._render("rows.html", legend_of=[family], family=family, page=page, filters=current, axis=axis,
                            axes=list(part.axes),
                            options=options(self.data.frames[family], part.filters, axis), q=params.get("q", ""),
                            rows_template=rows_template)

    def item(self, family: str, key: str) -> str | None:
        part = self.data.parts.get(family)
        return part.item(self, key) if part is not None else None

    def tables(self) -> str:
        return self._render("tables.html", sections=list(self.sections.values()))
