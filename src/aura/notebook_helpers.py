"""Helpers the report notebooks share (notebooks/<family>/*.ipynb import them; they only read produced files).

Each notebook reads a CSV a stage wrote, formats it into a table (`.csv` + `.md` under `tables_dir`) or draws a
figure. The helpers below make every notebook behave the same on degenerate input: an empty CSV (no items
survived construction), a model with no valid label, a rate of exactly 0 or 1. They never raise on such input;
they return an empty or labelled table / figure and print one line saying why it is empty.

This module is the core's and names no family: what only one family's notebooks use (its table columns, notes,
series and cell formats) lives in that family's ``aura.families.<name>.notebooks``, built on these helpers.
"""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import numpy as np
import pandas as pd

GROUP_ORDER = {"frontier": 0, "open-weight": 1, "safety-tuned": 2, "local": 3}
GROUP_MARK = {"frontier": "★", "open-weight": "○", "safety-tuned": "◇", "local": "·"}
MARKS = "★ frontier; ○ open-weight; ◇ safety-tuned; · local"
POOLED = "(all models)"
DASH = "–"


def read_plain(path, columns=()) -> pd.DataFrame:
    """The CSV, with every name in `columns` present (empty) even where the stage wrote an empty file or a table
    without it; prints one line when there is no row."""
    try:
        df = pd.read_csv(path)
    except pd.errors.EmptyDataError:
        df = pd.DataFrame()
    for col in columns:
        if col not in df:
            df[col] = pd.Series(dtype=object)
    if df.empty:
        print(f"{Path(path).name}: no rows (no item or model reached this stage); the output is an empty table")
    return df


def read(path, columns=()) -> pd.DataFrame:
    """`read_plain` of a per-model table, with ``model`` and label / group / mark present (label falls back to
    the model id, group to "", mark to the group's mark)."""
    df = read_plain(path, ("model", *columns))
    if "label" not in df:
        df.insert(df.columns.get_loc("model") + 1, "label", df["model"])
    for col in ("group", "mark"):
        if col not in df:
            df[col] = ""
    df["label"] = df["label"].where(df["label"].notna(), df["model"]).astype(str)
    df[["group", "mark"]] = df[["group", "mark"]].astype(object).where(df[["group", "mark"]].notna(), "").astype(str)
    df["mark"] = df["mark"].where(df["mark"] != "", df["group"].map(GROUP_MARK).fillna(""))  # tables without marks
    return df


def model_order(df: pd.DataFrame) -> list:
    """Model ids: by group (frontier, open-weight, safety-tuned, local, other) then label; the pooled row last."""
    m = df.drop_duplicates("model")
    key = lambda r: (r.model == POOLED, GROUP_ORDER.get(r.group, len(GROUP_ORDER)), r.label.lower(), str(r.model))
    return [r.model for r in sorted(m.itertuples(index=False), key=key)]


def display_names(df: pd.DataFrame) -> dict:
    """model id -> "<mark> <label>" ("All models (pooled)" for the pooled row)."""
    m = df.drop_duplicates("model")
    return {r.model: ("All models (pooled)" if r.model == POOLED else f"{r.mark} {r.label}".strip())
            for r in m.itertuples(index=False)}


def num(x) -> str:
    return DASH if pd.isna(x) else str(int(x))


def pct(x, digits: int = 1) -> str:
    """x is already a percentage."""
    return DASH if pd.isna(x) else f"{x:.{digits}f}"


def pct_of(rate, digits: int = 1) -> str:
    """rate is a fraction."""
    return DASH if pd.isna(rate) else f"{100 * rate:.{digits}f}"


def ci(low, high, digits: int = 1) -> str:
    """An interval of fractions, as percentages in brackets."""
    return "[–]" if pd.isna(low) or pd.isna(high) else f"[{100 * low:.{digits}f}, {100 * high:.{digits}f}]"


def share_cell(k, n, excluded=None) -> str:
    """"% (k/n)" with the excluded count, or "–" when n is 0 or missing."""
    if pd.isna(n) or not n:
        return DASH if excluded is None or pd.isna(excluded) else f"{DASH} (excl. {int(excluded)})"
    tail = "" if excluded is None or pd.isna(excluded) else f", excl. {int(excluded)}"
    return f"{100 * k / n:.1f} ({int(k)}/{int(n)}{tail})"


def write_table(df: pd.DataFrame, name: str, tables_dir, notes=()) -> Path:
    """Write `df` as ``<name>.csv`` and ``<name>.md`` (NaN shown as –, notes under the table). An empty table
    keeps its header and says so in the notes."""
    out = Path(tables_dir)
    out.mkdir(parents=True, exist_ok=True)
    df.to_csv(out / f"{name}.csv", index=False)
    notes = list(notes)
    if df.empty:
        notes.insert(0, "No rows: nothing reached this table (no items, or no model with such rows).")
        print(f"{name}: empty table written")
    shown = df.astype(object).where(df.notna(), DASH)
    text = shown.to_markdown(index=False, disable_numparse=True) + "\n"
    if notes:
        text += "\n" + "\n".join(notes) + "\n"
    (out / f"{name}.md").write_text(text)
    return out / f"{name}.md"


# Every figure is saved here, so two rebuilds from one cache give the same bytes: the PDF gets no creation date
# (matplotlib writes the current time, or SOURCE_DATE_EPOCH's, unless told None); the PNG holds no time (its one
# text chunk is matplotlib's Software line).
FIGURE_METADATA = {"pdf": {"CreationDate": None}, "png": {}}


def save(fig, out_pdf, out_png) -> None:
    for path, kw in ((out_pdf, {"metadata": FIGURE_METADATA["pdf"]}),
                     (out_png, {"dpi": 150, "metadata": FIGURE_METADATA["png"]})):
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, bbox_inches="tight", **kw)


def no_data(message: str):
    """A small figure that says why there is nothing to draw (the message is printed too)."""
    import matplotlib.pyplot as plt

    print(message)
    fig, ax = plt.subplots(figsize=(5, 1.5))
    ax.axis("off")
    ax.text(0.5, 0.5, message, ha="center", va="center", fontsize=10, color="#666666")
    return fig


def error_bars(rate, low, high) -> np.ndarray:
    """matplotlib's ``yerr`` (2 x n, non-negative) for point estimates with an interval: the distances from the
    estimate to each bound, clipped at 0 (a Wilson bound of a 0 or 100% rate can lie a rounding error on the
    wrong side of it, e.g. 2.8e-17 above 0) and 0 where any of the three is missing."""
    rate, low, high = (np.asarray(x, dtype=float) for x in (rate, low, high))
    err = np.vstack([rate - low, high - rate])
    return np.clip(np.nan_to_num(err, nan=0.0), 0.0, None)


def by_model(df: pd.DataFrame, *then: str) -> pd.DataFrame:
    """Rows in `model_order` (several rows per model kept, sorted by the `then` columns within a model)."""
    if df.empty:
        return df
    rank = {m: i for i, m in enumerate(model_order(df))}
    return df.assign(_rank=df["model"].map(rank)).sort_values(["_rank", *then], kind="stable").drop(columns="_rank")


def rate_cell(rate, low=None, high=None, digits: int = 1) -> str:
    """A fraction as "54.2 [40.1, 60.3]" (percent, its interval when given); "–" when not measured."""
    if pd.isna(rate):
        return DASH
    return pct_of(rate, digits) + ("" if low is None else f" {ci(low, high, digits)}")


def bars(groups, series, ylabel: str, title: str | None = None, ylim=(0, 100)):
    """A grouped bar chart of fractions drawn as percentages.

    groups: the x tick labels; series: (label, color, rate, low, high) with array-likes as long as `groups`
    (fractions; low/high may be None for no whisker). A NaN rate is drawn as "–" (nothing measured), never as
    a 0 bar; a measured 0 is labelled "0%" (the bars are percentages). Returns the figure."""
    import matplotlib.pyplot as plt

    x = np.arange(len(groups))
    width = 0.8 / max(1, len(series))
    fig, ax = plt.subplots(figsize=(max(4.5, 0.9 * len(groups) * max(1, len(series)) * 0.5 + 2.5), 3.6))
    for k, (label, color, rate, low, high) in enumerate(series):
        rate = np.asarray(rate, dtype=float) * 100
        xs = x + (k - (len(series) - 1) / 2) * width
        yerr = None if low is None else error_bars(rate, np.asarray(low, dtype=float) * 100,
                                                   np.asarray(high, dtype=float) * 100)
        ax.bar(xs, np.nan_to_num(rate), width, yerr=yerr, capsize=3, color=color, label=label)
        for xi, r in zip(xs, rate):
            if np.isnan(r) or r == 0:  # a measured zero says "0", nothing measured says "–"
                ax.text(xi, 1, DASH if np.isnan(r) else "0%", ha="center", va="bottom", fontsize=8,
                        color="#999999" if np.isnan(r) else "black")
    ax.set_xticks(x, list(groups), fontsize=8)
    ax.set_ylabel(ylabel)
    ax.set_ylim(*ylim)
    if title:
        ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8, frameon=False, loc="upper left", bbox_to_anchor=(1.0, 1.0))  # beside: never over the title
    ax.spines[["top", "right"]].set_visible(False)
    fig.tight_layout()
    return fig


def files_of(path) -> list[Path]:
    """The files a report parameter names: one path, a list of paths, or a JSON list of them (what the render rule
    passes for a per-model input: every model's file)."""
    import json

    if isinstance(path, str) and path.startswith("["):
        path = json.loads(path)
    return [Path(p) for p in (path if isinstance(path, (list, tuple)) else [path])]


def read_rows(path, columns=()) -> pd.DataFrame:
    """A stage's JSONL rows as a frame, over every file `path` names (files_of: one per model for a per-model
    input), the `columns` present even when there is no row; prints one line when there is none."""
    import json

    files = files_of(path)
    rows = [json.loads(line) for f in files for line in f.read_text(encoding="utf-8").splitlines() if line.strip()]
    df = pd.DataFrame(rows)
    path = files[0] if len(files) == 1 else f"{len(files)} files"
    for col in columns:
        if col not in df:
            df[col] = pd.Series(dtype=object)
    if df.empty:
        print(f"{Path(path).name}: no rows (nothing reached this stage)")
    return df


def draw_report(draw: str, inputs: dict, out_pdf=None, out_png=None, tables_dir=None):
    """A report drawn by a family's function (its manifest's ``draw``: ``"module:function"``) instead of a notebook
    of its own: the render builds a notebook that calls this. Each input is read as rows (`read_rows` for JSONL,
    `read_plain` for CSV) and passed by its layout key; the function returns a matplotlib figure, a dict of tables
    (name -> frame), or both as (figure, tables). The figure is saved to `out_pdf` / `out_png`, each table
    written with `write_table`; a report that declares a figure and gets none (or the reverse) is an error."""
    from aura.pipeline.stage import load_target

    frames = {key: read_rows(path) if str(files_of(path)[0]).endswith(".jsonl") else read_plain(path)
              for key, path in inputs.items()}
    result = load_target(draw)(**frames)
    fig, tables = result if isinstance(result, tuple) else (None, result) if isinstance(result, dict) else (result, {})
    if (fig is None) != (out_pdf is None):
        raise ValueError(f"{draw}: the report {'declares no' if out_pdf is None else 'declares a'} figure, the "
                         f"function returned {'one' if fig is not None else 'none'}")
    if fig is not None:
        save(fig, out_pdf, out_png)
    for name, table in (tables or {}).items():
        write_table(table, name, tables_dir)
    return fig if fig is not None else next(iter((tables or {}).values()), None)


# A reproduction's figure (``forest``): a summary of the outcomes per table on top, then the difference (run - paper)
# of every row that got a verdict, with its 95% interval and +-margin band, one axis per unit. The detail flows into
# columns side by side, like a newspaper's, so a family's verdict fits one screen. Sizes are in inches.
VERDICT_COLORS = {"reproduced": "#1b7837", "not reproduced": "#b2182b", "inconclusive": "#e08214",
                  "not comparable": "#bbbbbb"}
NOT_COMPARABLE = "not comparable"
UNIT_AXIS = {"percent": "difference, percentage points (run − paper)",
             "fraction": "difference, fraction (run − paper)", "count": "difference, count (run − paper)",
             "r": "difference in r (run − paper)", "alpha": "difference in Krippendorff's α (run − paper)",
             "p-value": "difference in p-value (run − paper)"}
# Rows drawn on their own axis, not their unit's: a p-value (reported as a fraction) beside rates would share their
# axis, Krippendorff's alpha (reported in units of r) beside correlations; the column names them.
AXIS_OF_COLUMN = {"p-value": "p-value", "alpha": "alpha"}
MARGIN_BAND = "#e3e3e3"
FONT = 6.5             # tick labels of the detail and the summary
LINE_IN = 0.12         # one row (or table header) of the detail
PLOT_IN = 1.9          # the width of a detail panel's data area
PANEL_TOP_IN = 0.12    # above a detail panel
PANEL_BOTTOM_IN = 0.55  # below a detail panel: its x ticks and axis label (two lines for a log scale)
COLUMN_GAP_IN = 0.3
BAR_IN = 0.17          # one table's bar in the summary
MAX_WIDTH_IN, MAX_HEIGHT_IN = 20.5, 16.2  # the PNG at dpi 150: about 3,100 x 2,450 px at most
COLUMN_LINES = 45      # lines a detail column aims at; more only when the width allows no more columns
LOG_RANGE = 50         # a unit's differences reach past 50 times its smallest margin: a symmetric log axis
LABEL_CHARS = 48       # a longer "row · column" label is cut with an ellipsis (the table has it whole)
PANEL_LINES = int(np.ceil((PANEL_TOP_IN + PANEL_BOTTOM_IN) / LINE_IN))  # a panel's frame, in lines


@lru_cache(maxsize=None)
def _text_in(text: str, size: float = FONT, bold: bool = False) -> float:
    """The width of `text` in inches at `size` points (the font's metrics, as the PNG's renderer measures them)."""
    from matplotlib.backends.backend_agg import RendererAgg
    from matplotlib.font_manager import FontProperties

    if not text:
        return 0.0
    prop = FontProperties(size=size, weight="bold" if bold else "normal")
    return RendererAgg(1, 1, 72).get_text_width_height_descent(text, prop, ismath=False)[0] / 72


def _cut(text, chars: int = LABEL_CHARS) -> str:
    text = str(text)
    return text if len(text) <= chars else text[:chars - 1] + "…"


def _numeric(verdicts: pd.DataFrame) -> pd.DataFrame:
    """The verdict rows with their numbers as floats (a column the file lacks, or left blank, is NaN), `unit` the axis
    each row is drawn on (AXIS_OF_COLUMN: a p-value or an alpha on its own)."""
    v = verdicts.copy()
    for col in ("reported", "reproduced", "difference", "diff_lo", "diff_hi", "margin"):
        v[col] = pd.to_numeric(v[col], errors="coerce") if col in v else np.nan
    for col in ("table", "row", "column", "unit", "verdict", "reason"):
        v[col] = v[col].astype(object).where(v[col].notna(), "").astype(str) if col in v else ""
    v["unit"] = [AXIS_OF_COLUMN.get(c.strip().lower(), u) for c, u in zip(v["column"], v["unit"])]  # the axis drawn
    return v


def _outcomes(verdicts: pd.DataFrame) -> list[str]:
    """The outcomes in their order, then any other verdict the file holds (drawn in grey)."""
    return list(VERDICT_COLORS) + [v for v in dict.fromkeys(verdicts["verdict"]) if v not in VERDICT_COLORS]


def _color(verdict: str) -> str:
    return VERDICT_COLORS.get(verdict, "#777777")


def _detail_lines(judged: pd.DataFrame) -> list[tuple[str, list]]:
    """Per unit (percent, fraction, count, r, then any other), its lines top to bottom: ("header", table) before
    each table's rows, then ("row", row) per row, in the file's order."""
    units = [u for u in UNIT_AXIS if u in set(judged["unit"])]
    units += [u for u in dict.fromkeys(judged["unit"]) if u not in units]
    out = []
    for unit in units:
        part, lines = judged[judged["unit"] == unit], []
        for table in dict.fromkeys(part["table"]):
            lines.append(("header", table))
            lines += [("row", r) for r in part[part["table"] == table].itertuples(index=False)]
        out.append((unit, lines))
    return out


def _flow(units: list, capacity: int) -> list[list]:
    """The units' lines poured into columns of at most `capacity` lines, each panel's frame counted
    (``PANEL_LINES``): a column is a list of (unit, lines) panels. A table cut between two columns goes on under
    its header marked "(cont.)"; a header never ends a panel."""
    capacity = max(capacity, PANEL_LINES + 4)
    columns, room = [[]], capacity
    for unit, lines in units:
        rest = list(lines)
        while rest:
            take = min(len(rest), room - PANEL_LINES)
            while 0 < take < len(rest) and rest[take - 1][0] == "header":
                take -= 1
            if take < 2 and take < len(rest):  # no room for a row: next column
                columns.append([])
                room = capacity
                continue
            chunk, rest = rest[:take], rest[take:]
            if rest and rest[0][0] == "row":
                rest.insert(0, ("header", f"{rest[0][1].table} (cont.)"))
            columns[-1].append((unit, chunk))
            room -= take + PANEL_LINES
    return [c for c in columns if c]


def _label(line) -> str:
    kind, item = line
    return _cut(item, LABEL_CHARS) if kind == "header" else _cut(f"{item.row} · {item.column}")


def _column_width(column) -> float:
    """A detail column's width: its longest y label, then the data area."""
    labels = [(_label(line), line[0] == "header") for _, lines in column for line in lines]
    return max(_text_in(t, bold=b) for t, b in labels) + 0.12 + PLOT_IN


def _layout(units: list, budget_in: float) -> list[list]:
    """The detail's columns: as many as ``COLUMN_LINES`` lines each ask for, no more than the width allows
    (taller columns instead, up to `budget_in` of height); what still does not fit wraps onto a further band of
    columns below (see ``_bands``)."""
    total = sum(len(lines) + PANEL_LINES for _, lines in units)
    widest = _column_width([(u, lines) for u, lines in units])
    across = max(1, int((MAX_WIDTH_IN + COLUMN_GAP_IN) // (widest + COLUMN_GAP_IN)))
    wanted = min(across, int(np.ceil(total / (COLUMN_LINES + PANEL_LINES))))
    tallest = max(int(budget_in / LINE_IN), COLUMN_LINES + PANEL_LINES)
    capacity = int(np.ceil(total / wanted))
    columns = _flow(units, capacity)
    while len(columns) > wanted and capacity < tallest:  # the cuts' "(cont.)" headers and frames take room
        capacity += 1
        columns = _flow(units, capacity)
    return columns


def _bands(columns: list) -> list[list]:
    """The columns in bands side by side, each band at most ``MAX_WIDTH_IN`` wide."""
    bands, width = [[]], 0.0
    for column in columns:
        w = _column_width(column) + COLUMN_GAP_IN
        if bands[-1] and width + w > MAX_WIDTH_IN + COLUMN_GAP_IN:
            bands.append([])
            width = 0.0
        bands[-1].append(column)
        width += w
    return bands


def _column_height(column) -> float:
    return sum(len(lines) * LINE_IN + PANEL_TOP_IN + PANEL_BOTTOM_IN for _, lines in column)


def _unit_scales(judged: pd.DataFrame) -> dict:
    """Per unit, the x axis every panel of that unit shares: (reach, linthresh). The range is symmetric about 0,
    +-reach wide enough for every difference, interval and margin; linthresh is set (a symmetric log scale, linear
    within +-linthresh, the smallest margin) when the reach passes ``LOG_RANGE`` times the smallest margin: counts
    without a denominator run from 1 to thousands, each with a margin in proportion."""
    scales = {}
    for unit, part in judged.groupby("unit", sort=False):
        reach = pd.concat([part[c].abs() for c in ("difference", "diff_lo", "diff_hi", "margin")]).max()
        reach = 1.0 if pd.isna(reach) or reach == 0 else float(reach)
        smallest = part["margin"][part["margin"] > 0].min()
        scales[unit] = (reach, float(smallest) if reach > LOG_RANGE * smallest else None)
    return scales


def _x_axis(ax, reach: float, linthresh: float | None) -> None:
    """A panel's x axis: linear, about 5 ticks, or symmetric log with 0 and at most two powers of ten a side."""
    from matplotlib.ticker import FixedLocator, MaxNLocator, NullLocator

    if linthresh is None:
        ax.set_xlim(-1.08 * reach, 1.08 * reach)
        ax.xaxis.set_major_locator(MaxNLocator(nbins=4, symmetric=True))
        return
    ax.set_xscale("symlog", linthresh=linthresh, linscale=0.5)
    ax.set_xlim(-1.3 * reach, 1.3 * reach)
    powers = [10.0 ** e for e in range(int(np.floor(np.log10(reach))), int(np.ceil(np.log10(linthresh))) - 1, -1)]
    shown = powers[:1] + powers[len(powers) // 2:len(powers) // 2 + 1] if len(powers) > 2 else powers
    ticks = sorted({0.0, *shown, *(-p for p in shown)})
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_major_formatter(lambda x, _: f"{x:g}")


def _difference_panel(ax, unit: str, lines: list, scale) -> None:
    """One detail panel: per row its difference (a circle with its 95% interval; a diamond, no sampling error),
    coloured by verdict, over its +-margin band (light grey); a line at 0; bold table headers."""
    n = len(lines)
    y = np.arange(n)[::-1].astype(float)
    rows = [(yi, item) for yi, (kind, item) in zip(y, lines) if kind == "row"]
    ys = np.array([yi for yi, _ in rows])
    get = lambda col: np.array([getattr(r, col) for _, r in rows], dtype=float)
    diff, lo, hi, margin = get("difference"), get("diff_lo"), get("diff_hi"), get("margin")
    colors = [_color(r.verdict) for _, r in rows]
    band = np.isfinite(margin)
    ax.barh(ys[band], 2 * margin[band], left=-margin[band], height=1.0, color=MARGIN_BAND, lw=0, zorder=0)
    ax.axvline(0, color="#333333", lw=0.6, zorder=1)
    spread = np.isfinite(lo) & np.isfinite(hi)
    ax.hlines(ys[spread], lo[spread], hi[spread], colors=[c for c, s in zip(colors, spread) if s], lw=1.3, zorder=2)
    for marker, keep in (("o", spread), ("D", ~spread)):
        keep = keep & np.isfinite(diff)
        ax.scatter(diff[keep], ys[keep], s=9 if marker == "o" else 8, marker=marker,
                   c=[c for c, k in zip(colors, keep) if k], zorder=3, linewidths=0)
    for yi, (kind, _) in zip(y, lines):
        if kind == "header" and yi < n - 1:
            ax.axhline(yi + 0.5, color="#999999", lw=0.4)
    ax.set_yticks(y, [_label(line) for line in lines], fontsize=FONT)
    for tick, (kind, _) in zip(ax.get_yticklabels(), lines):
        tick.set_fontweight("bold" if kind == "header" else "normal")
    ax.tick_params(axis="y", length=0, pad=2)
    ax.tick_params(axis="x", labelsize=FONT, length=2)
    ax.set_ylim(-0.5, n - 0.5)
    _x_axis(ax, *scale)
    ax.grid(axis="x", color="#eeeeee", lw=0.5, zorder=-1)
    label = UNIT_AXIS.get(unit, f"difference, {unit} (run − paper)")
    ax.set_xlabel(label + ("\nsymmetric log scale" if scale[1] else ""), fontsize=FONT + 0.5)
    ax.spines[["top", "right"]].set_visible(False)


def _summary_panel(ax, verdicts: pd.DataFrame, legend: list, columns: int) -> None:
    """Per table, one bar of how many rows got each outcome (stacked, counts written in where they fit, the
    total at its end), the legend above the bars in `columns` columns."""
    tables = list(dict.fromkeys(verdicts["table"]))
    y = np.arange(len(tables))[::-1]
    left = np.zeros(len(tables))
    width_in = ax.get_position().width * ax.figure.get_figwidth()
    most = max(1, verdicts.groupby("table").size().max())
    for outcome in _outcomes(verdicts):
        k = np.array([int(((verdicts["table"] == t) & (verdicts["verdict"] == outcome)).sum()) for t in tables])
        ax.barh(y, k, left=left, height=0.72, color=_color(outcome), lw=0)
        for yi, x0, ki in zip(y, left, k):
            if ki and _text_in(str(ki)) + 0.04 < ki / most * width_in:
                ax.text(x0 + ki / 2, yi, str(ki), ha="center", va="center", fontsize=FONT,
                        color="black" if outcome == NOT_COMPARABLE else "white")
        left += k
    for yi, total in zip(y, left):
        ax.text(total + most * 0.01, yi, str(int(total)), va="center", fontsize=FONT, color="#555555")
    ax.set_yticks(y, [_cut(t, 40) for t in tables], fontsize=FONT)
    ax.tick_params(axis="y", length=0)
    ax.tick_params(axis="x", labelsize=FONT, length=2)
    ax.set_ylim(-0.5, len(tables) - 0.5)
    ax.set_xlim(0, most * 1.06)
    ax.set_xlabel("reported numbers per table, by outcome", fontsize=FONT + 0.5)
    ax.spines[["top", "right"]].set_visible(False)
    ax.legend(handles=legend, loc="lower left", bbox_to_anchor=(0, 1.0), ncol=columns, frameon=False,
              fontsize=FONT + 0.5, handlelength=1.2, columnspacing=1.2, borderaxespad=0.3)


def _wrap(text: str, width_in: float, size: float) -> list[str]:
    """`text` cut at spaces into lines at most `width_in` wide (bold, `size` points)."""
    lines = [""]
    for word in text.split(" "):
        joined = f"{lines[-1]} {word}".strip()
        if lines[-1] and _text_in(joined, size, bold=True) > width_in:
            lines.append(word)
        else:
            lines[-1] = joined
    return lines


def _legend(outcomes: list, detail: bool) -> list:
    """The legend's entries: a patch per outcome and, when the detail is drawn, what its marks mean."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    handles = [Patch(color=_color(o), label=o) for o in outcomes]
    if detail:
        handles += [Line2D([], [], color="#555555", marker="o", ms=3, lw=1.3, label="difference, 95% interval"),
                    Line2D([], [], color="#555555", marker="D", ms=3, lw=0, label="no sampling error"),
                    Patch(color=MARGIN_BAND, label="± margin")]
    return handles


def _why_no_verdict(verdicts: pd.DataFrame) -> str:
    """The line the figure shows when no row got a verdict: the most common reason."""
    reasons = verdicts["reason"][verdicts["reason"] != ""]
    if reasons.empty:
        return f"No reported number got a verdict ({len(verdicts)} not comparable)."
    top = reasons.value_counts()
    if top.iloc[0] == len(verdicts):
        return f"No reported number got a verdict: all {len(verdicts)} are not comparable ({top.index[0]})."
    return (f"No reported number got a verdict: all {len(verdicts)} are not comparable, most often for "
            f"\"{top.index[0]}\" ({top.iloc[0]}); every row's reason is in the table.")


def forest(verdicts: pd.DataFrame, title: str | None = None):
    """A reproduction's verdicts on one screen (``aura.stats.verdict``'s rows). On top, per table, a bar of its
    rows by outcome (reproduced, not reproduced, inconclusive, not comparable), `title` (the summary line) above.
    Below, every row that got a verdict: its difference (run − paper) with its 95% interval (a diamond without
    interval: no sampling error), coloured by verdict, over its ±margin band, a line at 0; one axis per unit (a
    percent and an r never share one), the rows flowing into columns side by side under bold table headers,
    ``row · column`` labels. Not-comparable rows are only counted on top (their reasons are in the table); when
    no row got a verdict, a line says why. Returns the figure (``no_data`` when there is no row)."""
    import matplotlib.pyplot as plt

    if verdicts.empty:
        return no_data("no reference numbers to compare")
    v = _numeric(verdicts)
    judged = v[v["verdict"] != NOT_COMPARABLE]
    units = _detail_lines(judged)
    tables = v["table"].nunique()
    label_in = max(_text_in(_cut(t, 40)) for t in v["table"].unique()) + 0.1
    legend = _legend(_outcomes(v), bool(units))
    bars_in = tables * BAR_IN + 0.45  # the bars and their x axis
    bands = _bands(_layout(units, MAX_HEIGHT_IN - bars_in - 1.2)) if units else []
    widths = [[_column_width(c) for c in band] for band in bands]
    band_in = [max(_column_height(c) for c in band) for band in bands]
    width = max([sum(w) + COLUMN_GAP_IN * (len(w) - 1) for w in widths] + [label_in + 5.5])
    title_lines = _wrap(title, width, 9) if title else []
    legend_columns = len(legend) if width >= 8 else 4
    head_in = 0.2 + 0.17 * len(title_lines) + 0.17 * int(np.ceil(len(legend) / legend_columns))
    summary_in = head_in + bars_in
    height = summary_in + (sum(band_in) + 0.2 if bands else 0.35)
    fig = plt.figure(figsize=(width, height))
    place = lambda x, top, w, h: fig.add_axes((x / width, 1 - (top + h) / height, w / width, h / height))
    if title_lines:
        fig.text(0, 1 - 0.1 / height, "\n".join(title_lines), ha="left", va="top", fontsize=9, fontweight="bold")
    summary = place(label_in, head_in, min(width - label_in - 0.4, 9.0), tables * BAR_IN)
    _summary_panel(summary, v, legend, legend_columns)
    if not bands:
        fig.text(0.0, 0.02, _why_no_verdict(v), fontsize=FONT + 1, color="#555555", ha="left", va="bottom")
    scales, top = _unit_scales(judged), summary_in + 0.05
    for band, band_widths, band_height in zip(bands, widths, band_in):
        x = 0.0
        for column, column_width in zip(band, band_widths):
            y = top
            for unit, lines in column:
                y += PANEL_TOP_IN
                ax = place(x + column_width - PLOT_IN, y, PLOT_IN, len(lines) * LINE_IN)
                _difference_panel(ax, unit, lines, scales[unit])
                y += len(lines) * LINE_IN + PANEL_BOTTOM_IN
            x += column_width + COLUMN_GAP_IN
        top += band_height
    return fig


def is_rehearsal(path) -> bool:
    """Whether a produced file comes from a dress rehearsal (``aura rehearse``): its provenance sidecar says so."""
    import json

    from .provenance import sidecar_path

    side = sidecar_path(path)
    return side.is_file() and bool(json.loads(side.read_text(encoding="utf-8")).get("rehearsal"))


def reproduction_report(verdicts_path, consistency_path, family: str, name: str, tables_dir, out_pdf, out_png):
    """A family's reproduction report from its reproduction stage's two CSVs (``aura.stats.reproduction``): the
    verdict table ``<name>`` (its notes say what each outcome means), the paper's own findings
    ``<name>_consistency`` and the figure (``forest``); prints the summary line. Returns (verdicts, findings)."""
    from .stats.consistency import FINDING_COLUMNS
    from .stats.verdict import VERDICT_COLUMNS, summary_line

    verdicts = read_plain(verdicts_path, VERDICT_COLUMNS)
    findings = read_plain(consistency_path, FINDING_COLUMNS)
    line = summary_line(family, verdicts, rehearsal=is_rehearsal(verdicts_path))
    print(line)
    write_table(verdicts, name, tables_dir, notes=[line, *OUTCOME_NOTES])
    write_table(findings, f"{name}_consistency", tables_dir,
                notes=["The paper checked against itself (aura.stats.consistency): percentages against their n, "
                       "averages against their parts, tables over the same cases."
                       + (" No finding: the numbers agree with themselves." if findings.empty else "")])
    save(forest(verdicts, title=line), out_pdf, out_png)
    return verdicts, findings


OUTCOME_NOTES = (
    "difference = reproduced − reported, with its 95% interval diff_lo..diff_hi and the equivalence margin, in the "
    "row's unit (a count compared as a rate of its n: percent); lo..hi is the reproduced number's own 95% interval.",
    "reproduced: the difference's 90% interval lies inside ±margin: the two numbers are equivalent by two "
    "one-sided tests at 5%.",
    "not reproduced: the difference's interval excludes 0 after the multiplicity control over the family's tested "
    "rows (Holm's family-wise control by default; p_adjusted), or a number without sampling error differs from "
    "the paper's by more than its margin.",
    "inconclusive: neither; n_to_decide is how many items of the run would decide it if the difference stayed as "
    "observed (blank: no run size can, the paper's own sampling error is too wide).",
    "not comparable: nothing fair can be said; reason says why (demo data, model unavailable, excluded cases, not "
    "produced, different models).",
)
