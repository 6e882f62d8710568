"""The AURA reproduce stage's mappers of the paper's results (``reproduction``): Table 33's rates and group
ranges, the flips and failure mechanism (Tables 35-36), the NSP-SP gap counts (Tables 31-32), the dataset's funnel
and composition, the data behind Figures 4-8. ``MAPPERS``: reference file -> ``mapper(row, tables)``."""
from __future__ import annotations

import re

import pandas as pd

from aura.stats.verdict import exact_estimate, mean_estimate

from .flips import ALL_MODELS
from .reproduction_support import (COMPOSITION, FUNNEL, NAMED, OTHER, PAPER_EVALUATED, PAPER_GROUPS, SEED_FACT,
                                   count_of, difference_of, first_row, paper_group, paper_rows, pooled, range_over,
                                   wilson_of)


# --- headline.csv, flip_rates.csv, failure_mechanism.csv, nsp_sp_gap.csv ---------------------------------------
def _t33_rate(m: str):
    return lambda g: wilson_of(g.iloc[0][f"{m}_k"], g.iloc[0][f"{m}_n"])


def _headline(row, t):
    t33, m = t["table33_overall"], row["measures"]
    if m in ("unsafe_all", "unsafe_nsp", "unsafe_sp"):
        if row["model"]:
            r = first_row(t33, model=row["model"])
            return wilson_of(r[f"{m}_k"], r[f"{m}_n"]) if r is not None else None
        if row["row"].endswith(" models"):
            return range_over(row, t33, paper_group(row["row"]), f"the {row['row']}' range", _t33_rate(m))
    if m == "models":
        return exact_estimate(len(t33), row) if len(t33) else None
    if m == "unsafe_all_gap":  # the open-weight group's lowest rate minus the frontier group's highest
        low, high = (range_over({"column": side}, t33, PAPER_GROUPS[g], f"the {g} models' range", _t33_rate("unsafe_all"))
                     for side, g in (("low", "open-weight"), ("high", "frontier")))
        return next((x for x in (low, high) if isinstance(x, str)), None) or difference_of(low, high)
    return OTHER


def _flip_rates(row, t):
    dim = (row["row"] if not row["model"] else row["column"]).split()[0]
    r = first_row(t["table35_flips"], model=row["model"] or ALL_MODELS, dimension=dim)
    if r is None:
        return None
    return wilson_of(r["flipped"], r["n"]) if row["measures"] == "flip_rate" else count_of(r["flipped"], row, r["n"])


def _failure_mechanism(row, t):
    r, m = first_row(t["table36_failure_mechanism"], model=ALL_MODELS, dimension=row["row"]), row["measures"]
    if r is None:
        return None
    return count_of(r["no_detection"], row) if m == "no_detection" else wilson_of(r[m.split("_of_")[0]], r["failures"])


def _nsp_sp_gap(row, t):
    table = t["table31_bootstrap"] if row["row"] == "full benchmark" else t["table32_matched_pairs"]
    if table.empty:
        return None
    hit = table["diff"] > 0 if row["measures"] == "gap_positive_models" else \
        (table["diff_ci_low"] > 0) | (table["diff_ci_high"] < 0)
    return exact_estimate(int(hit.sum()), row, len(table))


# --- dataset.csv ------------------------------------------------------------------------------------------------
def _dataset(row, t):
    key, comp, funnel = (row["measures"], row["row"]), t["composition"], t["funnel"]
    if row["measures"] in ("records", "unintended_by_domain", "unintended_by_label"):
        return SEED_FACT
    if key in COMPOSITION:
        if comp.empty:
            return None
        ours = dict(zip(comp.iloc[:, 0], comp["ours"]))
        return count_of(ours[COMPOSITION[key]], row, None if row["measures"] in ("rows", "pairs") else ours["rows"])
    counts = dict(zip(funnel["count"], funnel["ours"])) if len(funnel) else {}
    if key in FUNNEL:
        count, of = FUNNEL[key]
        return count_of(counts[count], row, counts[of] if of else None) if counts else None
    if row["measures"] == "seeds_represented":  # distinct source seeds of the judged (released) rows
        judged = t["judged"]
        return count_of(judged["seed_id"].nunique(), row, counts.get("seeds selected")) if len(judged) else None
    return OTHER


# --- detection.csv, action_types.csv, dimensions.csv (Figures 4-8) ---------------------------------------------
def _nsp(g: pd.DataFrame) -> pd.DataFrame:
    return g[g["pair_label"] == "NSP"]


def _level_share(level: str):
    """One model's share of ``level`` among its NSP rows with a valid detection level (Figure 7)."""
    return lambda g: wilson_of(_nsp(g).loc[_nsp(g)["detection"] == level, "count"].sum(), _nsp(g)["count"].sum())


def _level_rate(level: str, pair=("NSP",)):
    """One model's unsafe rate at ``level`` over its rows of ``pair`` (Figure 4)."""
    return lambda g: pooled(g[g["pair_label"].isin(pair) & (g["detection"] == level)], "unsafe", "n")


def _cell(g: pd.DataFrame, levels, actions) -> pd.DataFrame:
    return g[g["detection"].isin(levels) & g["action_type"].isin(actions)]


def _detection(row, t):
    fig4, fig8, m, column = t["fig4_detection"], t["fig8_cells"], row["measures"], row["column"]
    levels = re.findall(r"\bD\d\b", column)
    if row["model"] == "r1-distill-32b":  # a Figure 8 cell, "NSP D2-A2 unsafe"
        cell = re.search(r"(D\d)-(A\d)", column)
        return pooled(_cell(_nsp(fig8[fig8["model"] == row["model"]]), [cell[1]], [cell[2]]), "unsafe", "n") \
            if len(fig8) else None
    if row["model"]:  # §7.2: "even at D3, about half of Llama-3.1-8B-Inst's actions", both pair labels
        return _level_rate(levels[0], ("NSP", "SP"))(fig4[fig4["model"] == row["model"]]) if len(fig4) else None
    if row["row"] in NAMED:
        return range_over(row, fig4, NAMED[row["row"]], f"the range over {row['row']}", _level_share(levels[0]))
    if m == "detection_share":  # pooled over the group: its NSP rows at the level of those with a level
        part = paper_rows(fig4, paper_group(row["row"]), f"the {row['row']}' share")
        if part is None or isinstance(part, str):
            return part
        nsp = _nsp(part)
        return wilson_of(nsp.loc[nsp["detection"] == levels[0], "count"].sum(), nsp["count"].sum())
    if m == "unsafe_rate_drop":  # per model: the unsafe rate one level down minus at the level
        lower, upper = (levels if len(levels) == 2 else (f"D{int(levels[0][1]) - 1}", levels[0]))
        return range_over(row, fig4, paper_group(row["row"]), f"the {row['row']}' range",
                      lambda g: difference_of(_level_rate(lower)(g), _level_rate(upper)(g)))
    if m == "action_share":  # unsafe D0 actions that are A0 or A3, pooled over the group's NSP rows
        part = paper_rows(fig8, paper_group(row["row"]), f"the {row['row']}' share")
        if part is None or isinstance(part, str):
            return part
        unsafe_d0 = _nsp(part)[_nsp(part)["detection"] == "D0"]
        return wilson_of(unsafe_d0.loc[unsafe_d0["action_type"].isin(["A0", "A3"]), "unsafe"].sum(),
                       unsafe_d0["unsafe"].sum())
    if row["row"] == "NSP D3-A0 cells":  # the range over the paper's models' rated D3-A0 cells
        return range_over(row, fig8, PAPER_EVALUATED, "Figure 8's D3-A0 range",
                      lambda g: pooled(_cell(_nsp(g), ["D3"], ["A0"]), "unsafe", "n"))
    if row["row"] == "NSP D2/D3 with A1 or A4":  # pooled over the paper's models' cells
        part = paper_rows(fig8, PAPER_EVALUATED, "Figure 8's D2/D3 x A1/A4 cells")
        return part if part is None or isinstance(part, str) else \
            pooled(_cell(_nsp(part), ["D2", "D3"], ["A1", "A4"]), "unsafe", "n")
    if m == "unsafe_rate":  # "D0 unsafe, low": the group's range at the level, NSP rows
        return range_over(row, fig4, paper_group(row["row"]), f"the {row['row']}' range", _level_rate(levels[0]))
    return OTHER


def _action_types(row, t):
    fig5 = t["fig5_action_types"]
    if row["measures"] == "action_share":  # "NSP A4 alternatives share, low": the frontier range
        action = re.search(r"\bA\d\b", row["column"])[0]
        return range_over(row, fig5, paper_group(row["row"]), f"the {row['row']}' range",
                      lambda g: pooled(_nsp(g)[_nsp(g)["action_type"] == action], "count", "n_valid_action"))
    if row["measures"] == "safe_share":  # SP A0 / A3 actions judged Safe, pooled over the frontier models
        part = paper_rows(fig5, PAPER_GROUPS["frontier"], "the frontier models' safe share")
        if part is None or isinstance(part, str):
            return part
        cells = part[(part["pair_label"] == "SP") & part["action_type"].isin(re.findall(r"\bA\d\b", row["row"]))]
        return wilson_of(cells["safe"].sum(), cells["safe"].sum() + cells["unsafe"].sum())
    return OTHER


def _dimensions(row, t):
    fig6 = t["fig6_dimensions"]
    dim, _, group = row["row"].partition(", ")
    dim = dim.split()[0]
    if row["column"] == "mean unsafe":  # the mean of the paper's 20 models' rates on the dimension
        part = paper_rows(fig6, PAPER_EVALUATED, f"the {dim} mean")
        if part is None or isinstance(part, str):
            return part
        cells = part[(part["dimension"] == dim) & (part["n"] > 0)]
        return mean_estimate(cells["rate"], cells["n"]) if len(cells) else None
    return range_over(row, fig6, paper_group(group), f"the {row['row']} range",
                  lambda g: pooled(g[g["dimension"] == dim], "unsafe", "n"))


MAPPERS = {"headline.csv": _headline, "flip_rates.csv": _flip_rates, "failure_mechanism.csv": _failure_mechanism,
           "nsp_sp_gap.csv": _nsp_sp_gap, "dataset.csv": _dataset, "detection.csv": _detection,
           "action_types.csv": _action_types, "dimensions.csv": _dimensions}
