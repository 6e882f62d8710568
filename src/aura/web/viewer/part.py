"""What a benchmark family brings to the run viewer: a `ViewerPart`.

A family's manifest names its part as ``viewer="package.module:PART"``, where PART is a ViewerPart
subclass. For every run it reads, the viewer makes one instance per enabled family with a part
(`make_part`), asks it for its list rows (`load`) and, later, for its item pages (`item`) and its section
of the tables page (`tables`). The instance may keep the run's detail records it reads in `load` (items,
answers, verdicts) as its own attributes; the frame never looks inside them.

The frame (data, query, pages, app, export) knows nothing else about a family:

- `title`: its name in the navigation, the index and the list page's heading;
- `filters`: the columns of its rows a list can be filtered on (select boxes and URL parameters, in
  this order; default `model` and `label`); a `model` column is expected, since the index links each
  model's rows;
- `axes`: its label axes, each with its valid labels. A filter `<name>` reads the column
  `<name>_<axis>` when the rows have one (the axis picked on the list page, `default_axis` unless
  given), else `<name>`; `label=excluded` then selects the rows without a valid label on that axis;
- `rows_template`: the template of its list table (the `<tr>` rows of `page.rows`; without one, the
  frame's `part_rows.html` shows every column of the rows as it is). It, and any template `item` and
  `tables` render, lie in the part's own `templates` folder (by default `templates/` next to the
  module that defines the part), so a family from another package carries its own; the frame names
  them `<family>/<file>`. They may extend the frame's `base.html` and import its `macros.html`
  (`label`, `steps`), and see `data`, `links`, `static`, `titles`, `run_title`, `anchor` and
  `ngettext` ("{{ n }} {{ ngettext('step', 'steps', n) }}");
  `pages.render_part(part, file, **context)` renders one. The rows template also sees `page` (the
  rows shown), `family`, `axis` and `axes`;
- `tables_note` (the index's words for its tables section) and `css` (style rules for its labels'
  badges, `.lab-<label in lower case>`, put in every page) are the family's code, written into the
  pages as they are;
- `legend()`: what its codes and labels mean (heading -> {code: meaning}); the frame renders it under
  "Legend" in the navigation bar of the family's pages (every family's on the index and tables pages);
- `media(data, layout)`: the run's folders whose files its pages show (images). The frame serves files
  under these folders only (`/media/<n>/<path>`; anything else is a 404) and copies the shown ones into
  an export; a template links a file with `links.media(path)` (None when it lies outside them).
"""
from __future__ import annotations

import inspect
from pathlib import Path
from typing import TYPE_CHECKING

from ...families.base import Family, load_target

if TYPE_CHECKING:
    import pandas as pd

# `data` below is the run being read (data.RunData), `pages` the pages of it being rendered (pages.Pages):
# this module imports neither, as both import it.


class ViewerPart:
    """One family's part of the viewer for one run (subclass it; see the module docstring).

    The rows `load` returns hold a `key` (what `links.item(name, key)` opens), a lower-cased `text`
    column (what a text search looks in) and the columns `filters` and `axes` name."""

    title: str = ""  # default: the manifest's title up to its first ':'
    filters: tuple[str, ...] = ("model", "label")
    axes: dict[str, list[str]] = {}
    default_axis: str = ""  # default: the first axis
    rows_template: str = ""
    tables_note: str = ""
    css: str = ""

    def __init__(self, family: Family):
        self.name = family.name
        self.title = type(self).title or family_title(family)

    @property
    def axis(self) -> str:
        """The axis a list shows when none is picked ('' for a family without axes)."""
        return self.default_axis or next(iter(self.axes), "")

    @property
    def columns(self) -> list[str]:
        """The columns filters read: each filter, and each per-axis column of one."""
        return [*self.filters, *(f"{f}_{a}" for f in self.filters for a in self.axes)]

    @property
    def templates(self) -> Path:
        """The folder of this part's templates."""
        return Path(inspect.getfile(type(self))).parent / "templates"

    def load(self, data, layout: dict) -> pd.DataFrame | None:
        """Read this family's produced files (`data.path`, `data.files` over `layout`'s patterns) and
        return its list rows, or None / an empty frame when the run produced nothing of it."""
        raise NotImplementedError

    def item(self, pages, key: str) -> str | None:
        """The HTML page of one row's `key`, or None when there is no such item (a 404)."""
        return None

    def tables(self, pages) -> str | None:
        """This family's section of the tables page (HTML), or None when it has none."""
        return None

    def legend(self) -> dict[str, dict[str, str]]:
        """What this family's codes and labels mean: heading -> {code or label: its meaning}, in the order
        shown ({} = no legend)."""
        return {}

    def media(self, data, layout: dict) -> list[Path]:
        """The run's folders whose files this family's pages show (relative paths: to the run's root);
        the only folders the viewer serves files from. Default: none."""
        return []


def family_title(family: Family) -> str:
    """A family's short name: its manifest's title up to the first ':'."""
    return family.title.split(":", 1)[0].strip()


class StageRows(ViewerPart):
    """The part of a family that brings none: one row per record its stages wrote (every JSONL output of its
    stages' declarations), with its model, its label (the record's ``label``, else its ``status``) and every
    field shown as it is (the frame's default row template); filters: model, label and the output it is from."""

    filters = ("model", "label", "output")

    def __init__(self, family: Family):
        super().__init__(family)
        self.family = family

    def load(self, data, layout: dict):
        import json

        import pandas as pd

        keys = [k for st in self.family.stages.values() for k in st.outputs.values()
                if k and layout.get(k, "").endswith(".jsonl")]
        rows = []
        for key in dict.fromkeys(keys):
            for _, path in data.files(layout[key]):
                for i, line in enumerate(path.read_text(encoding="utf-8").splitlines()):
                    if line.strip():
                        rec = json.loads(line)
                        rows.append({"key": f"{path.stem}-{i}", "output": key, "model": rec.get("model", ""),
                                     "label": rec.get("label") or rec.get("status") or "", **{
                                         k: v for k, v in rec.items() if k not in ("key", "model", "label")
                                         and isinstance(v, (str, int, float, bool))},
                                     "text": line.lower()})
        return pd.DataFrame(rows)


def make_part(family: Family) -> ViewerPart:
    """A fresh part for one run, from the manifest's `viewer`; a family without one gets `StageRows`."""
    if not family.viewer:
        return StageRows(family)
    cls = load_target(family.viewer)
    if not (isinstance(cls, type) and issubclass(cls, ViewerPart)):
        raise ValueError(f"family '{family.name}': viewer = {family.viewer} is not a ViewerPart subclass "
                         "(aura.web.viewer.part.ViewerPart)")
    return cls(family)
