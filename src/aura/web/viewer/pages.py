"""The viewer's pages as HTML strings, shared by the served app and the static export.

`Links` is the only thing that differs: served, a list is a filter URL (`/rows?family=aura&model=m&...`)
and an item a path; exported, every page is a flat file in the site folder, linked relatively, and each
link made while rendering queues its target for the exporter (so the site has no dead link and only the
lists something links to).
"""
from __future__ import annotations

import difflib
import hashlib
import html
import re
from urllib.parse import quote, urlencode

from jinja2 import Environment, PackageLoader, select_autoescape

from ...data.trajectory import render_steps
from ...evaluate.schemas import AXES
from .data import FAMILY_TITLES, RunData
from .query import FILTERS, Searcher, options, query

PARAMS = ("family", *FILTERS, "axis", "q", "page")


def environment() -> Environment:
    env = Environment(loader=PackageLoader("aura.web.viewer", "templates"), autoescape=select_autoescape(["html"]),
                      trim_blocks=True, lstrip_blocks=True)
    return env


def _safe(text: str) -> str:
    clean = re.sub(r"[^A-Za-z0-9_.=-]+", "_", text)
    if clean != text:
        clean += "-" + hashlib.sha256(text.encode()).hexdigest()[:8]
    return clean


class Links:
    """URLs of the viewer's pages; `static=True` gives relative file names and queues their targets."""

    def __init__(self, static: bool = False):
        self.static = static
        self.pending: dict[str, tuple] = {}  # file name -> ("rows", params) | ("item", family, key)

    def rows(self, family: str, **params) -> str:
        params = {k: str(v) for k, v in params.items() if v not in (None, "") and k in PARAMS and k != "family"}
        if params.get("page") == "1":
            del params["page"]
        if not self.static:
            return "/rows?" + urlencode({"family": family, **{k: params[k] for k in PARAMS if k in params}})
        page = params.pop("page", "1")
        params.pop("q", None)  # the static site has no search
        slug = "-".join(f"{k}={params[k]}" for k in PARAMS if k in params)
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

    def home(self) -> str:
        return "index.html" if self.static else "/"

    def tables(self) -> str:
        return "tables.html" if self.static else "/tables"

    def css(self) -> str:
        return "static/viewer.css" if self.static else "/static/viewer.css"


class Pages:
    def __init__(self, data: RunData, links: Links):
        self.data, self.links = data, links
        self.env = environment()
        self.searcher = Searcher(data)

    def _render(self, template: str, **ctx) -> str:
        return self.env.get_template(template).render(data=self.data, links=self.links, static=self.links.static,
                                                      titles=FAMILY_TITLES, axes=list(AXES), anchor=_safe, **ctx)

    def index(self) -> str:
        counts = {f: len(self.data.frames[f]) for f in self.data.families}
        models = {f: sorted(m for m in self.data.frames[f]["model"].cat.categories if m) for f in self.data.families}
        return self._render("index.html", counts=counts, models=models)

    def rows(self, family: str, params: dict) -> str | None:
        if family not in self.data.frames or self.data.frames[family].empty:
            return None
        axis = params.get("axis") or "safety"
        if axis not in AXES:
            axis = "safety"
        try:
            page_no = int(params.get("page") or 1)
        except ValueError:
            page_no = 1
        filters = {k: params.get(k, "") for k in FILTERS}
        page = query(self.data, family, filters, q=params.get("q", ""), axis=axis, page=page_no, searcher=self.searcher)
        current = {k: v for k, v in filters.items() if v}
        current.update({k: params[k] for k in ("axis", "q") if params.get(k)})
        return self._render("rows.html", family=family, page=page, filters=current, axis=axis,
                            options=options(self.data.frames[family], axis), q=params.get("q", ""))

    def item(self, family: str, key: str) -> str | None:
        if family == "aura" and key in self.data.items:
            return self._aura_item(key)
        if family == "pasbench" and key in self.data.pas_items:
            return self._render("pasbench_item.html", item=self.data.pas_items[key],
                                samples=sorted(self.data.pas_samples.get(key, []), key=lambda s: (s["model"], s["sample"])))
        if family == "lpsbench":
            ep_key = tuple(key.split("/", 2))
            if len(ep_key) == 3 and ep_key in self.data.episodes:
                return self._render("lpsbench_episode.html", episode=self.data.episodes[ep_key],
                                    evaluation=self.data.evaluations.get(ep_key),
                                    case=self.data.cases.get(ep_key[2], {}))
        return None

    def _aura_item(self, item_id: str) -> str:
        d = self.data
        item = d.items[item_id]
        item_text = render_steps(item.get("steps") or []).splitlines()
        source = d.source_steps(item)
        diff = None
        if source is not None:
            name, steps = source
            diff = difflib.HtmlDiff(wrapcolumn=70).make_table(render_steps(steps).splitlines(), item_text,
                                                              fromdesc=html.escape(name),
                                                              todesc=html.escape(f"this item ({item_id})"),
                                                              context=True, numlines=1)
        models = sorted(d.models_of.get(item_id, ()))
        per_model = []
        for m in models:
            judgments = d.judgments.get((m, item_id), [])
            judges = sorted({j["judge"] for j in judgments}
                            | {j for a in AXES for j in ((d.panel.get((m, item_id)) or {}).get(f"{a}_votes") or {})})
            cells = {(j["judge"], j["axis"]): j for j in judgments}
            per_model.append({"model": m, "rollout": d.rollouts.get((m, item_id)), "panel": d.panel.get((m, item_id)),
                              "judges": judges, "cells": cells})
        return self._render("aura_item.html", item=item, partner=d.partner(item), diff=diff, per_model=per_model)

    def tables(self) -> str:
        t33 = []
        for r in self.data.table33:
            row = {"model": r["model"], "label": r.get("label") or r["model"], "cells": []}
            for pl, key in (("NSP", "unsafe_nsp"), ("SP", "unsafe_sp")):
                k, n, excl = (int(float(r[f"{key}_{x}"] or 0)) for x in ("k", "n", "excluded"))
                for label, count in (("Unsafe", k), ("Safe", n - k), ("excluded", excl)):
                    row["cells"].append({"pair_label": pl, "label": label, "count": count,
                                         "href": self.links.rows("aura", model=r["model"], pair_label=pl,
                                                                 axis="safety", label=label)})
            t33.append(row)
        lps = []
        for r in self.data.lps_table3:
            where = {"model": r["model"], "variant": r["variant"], "dimension": r["risk"]}
            lps.append({**where, "label": self.data.labels.get(r["model"], r["model"]), "safe_rate": r["safe_rate"],
                        "cells": [{"label": o, "count": int(float(r[o] or 0)),
                                   "href": self.links.rows("lpsbench", label=o, **where)}
                                  for o in ("safe", "unsafe", "execution_failed")],
                        "beside": sum(int(float(r[o] or 0)) for o in ("unparsed", "failed", "not_applicable", "missing"))})
        return self._render("tables.html", t33=t33, lps=lps)
