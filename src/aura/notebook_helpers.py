"""Helpers the report notebooks share (notebooks/<family>/*.ipynb import them; they only read produced files).

Each notebook reads a CSV a stage wrote, formats it into a table (`.csv` + `.md` under `tables_dir`) or draws a
figure. The helpers below make every notebook behave the same on degenerate input: an empty CSV (no items
survived construction), a model with no valid label, a rate of exactly 0 or 1. They never raise on such input;
they return an empty or labelled table / figure and print one line saying why it is empty.

This module is the core's and names no family: what only one family's notebooks use (its table columns, notes,
series and cell formats) lives in that family's ``aura.families.<name>.notebooks``, built on these helpers.
"""
from __future__ import annotations

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
    a 0 bar; a measured 0 is labelled "0". Returns the figure."""
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
                ax.text(xi, 1, DASH if np.isnan(r) else "0", ha="center", va="bottom", fontsize=8,
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


def read_rows(path, columns=()) -> pd.DataFrame:
    """A stage's JSONL rows as a frame (the `columns` present even when the file is empty); prints one line when
    there is no row."""
    import json

    text = Path(path).read_text(encoding="utf-8")
    df = pd.DataFrame([json.loads(line) for line in text.splitlines() if line.strip()])
    for col in columns:
        if col not in df:
            df[col] = pd.Series(dtype=object)
    if df.empty:
        print(f"{Path(path).name}: no rows (nothing reached this stage)")
    return df


VERDICT_COLORS = {"within": "#1b7837", "outside": "#b2182b", "not comparable": "#999999"}


def forest(verdicts: pd.DataFrame, title: str | None = None):
    """A forest plot of a reproduction (``aura.stats.reproduce.compare``'s rows): one line per reported number,
    the reproduced 95% interval as a bar with its point (a circle), the paper's value as a diamond, coloured by
    verdict; a not-comparable row shows only the paper's value, in grey, with its reason at the right. One panel
    per unit (percent and r never share an axis). Returns the figure (``no_data`` when there is no row)."""
    import matplotlib.pyplot as plt

    if verdicts.empty:
        return no_data("no reference numbers to compare")
    units = list(dict.fromkeys(verdicts["unit"]))
    sizes = [int((verdicts["unit"] == u).sum()) for u in units]
    fig, axes = plt.subplots(len(units), 1, squeeze=False, gridspec_kw={"height_ratios": sizes},
                             figsize=(7.5, 0.9 + 0.24 * sum(sizes) + 0.5 * len(units)))
    for ax, unit in zip(axes[:, 0], units):
        part = verdicts[verdicts["unit"] == unit].reset_index(drop=True)
        y = np.arange(len(part))[::-1]
        for yi, r in zip(y, part.itertuples(index=False)):
            color = VERDICT_COLORS.get(r.verdict, "#999999")
            if r.verdict != "not comparable":
                ax.plot([r.lo, r.hi], [yi, yi], color=color, lw=2, solid_capstyle="butt")
                ax.plot(r.reproduced, yi, "o", color=color, ms=4)
            else:
                ax.text(1.01, yi, f"not comparable: {r.reason}", transform=ax.get_yaxis_transform(),
                        va="center", fontsize=7, color="#777777")
            ax.plot(r.reported, yi, "D", mfc="white" if r.verdict == "not comparable" else color, mec=color, ms=5)
        ax.set_yticks(y, [f"{r.table} · {r.row} · {r.column}" for r in part.itertuples(index=False)], fontsize=7)
        ax.set_ylim(-0.7, len(part) - 0.3)
        ax.set_xlabel(f"{unit}: paper ◆, reproduced ● with its 95% interval", fontsize=8)
        ax.spines[["top", "right"]].set_visible(False)
    if title:
        axes[0, 0].set_title(title, fontsize=10)
    fig.tight_layout()
    return fig


def reproduction_report(verdicts_path, consistency_path, family: str, name: str, tables_dir, out_pdf, out_png):
    """A family's reproduction report from its reproduction stage's two CSVs (``aura.stats.reproduction``): the
    verdict table ``<name>``, the paper's own findings ``<name>_consistency`` and the forest figure; prints the
    summary line. Returns (verdicts, findings)."""
    from .stats.consistency import FINDING_COLUMNS
    from .stats.reproduce import VERDICT_COLUMNS, summary_line

    verdicts = read_plain(verdicts_path, VERDICT_COLUMNS)
    findings = read_plain(consistency_path, FINDING_COLUMNS)
    line = summary_line(family, verdicts)
    print(line)
    write_table(verdicts, name, tables_dir, notes=[line, "within: the reported number lies in the reproduced 95% "
                                                   "interval (a bound: the interval reaches its side)."])
    write_table(findings, f"{name}_consistency", tables_dir,
                notes=["The paper checked against itself (aura.stats.consistency): percentages against their n, "
                       "averages against their parts, tables over the same cases."
                       + (" No finding: the numbers agree with themselves." if findings.empty else "")])
    save(forest(verdicts, title=line), out_pdf, out_png)
    return verdicts, findings
