"""PaSBench's notebook helpers (notebooks/pasbench/*.ipynb): rates are fractions with ``<rate>_lo`` /
``<rate>_hi`` bootstrap bounds. The generic reading / formatting / figure helpers are the core's
``aura.notebook_helpers``."""
from __future__ import annotations

PAS_RATES = {  # the paper's three settings (§4), drawn worst to best
    "worst_of_n": ("Robustness (Worst-of-N)", "#c0392b"),
    "avg_of_n": ("Accuracy (Average-of-N)", "#7f8c8d"),
    "best_of_n": ("Potential (Best-of-N)", "#2e86c1"),
}
PAS_RATE_COLUMNS = [f"{r}{s}" for r in PAS_RATES for s in ("", "_lo", "_hi")]

# Figure 5 (fig5_knowledge.ipynb): the knowledge probe's outcomes (probes.run_knowledge, metrics.knowledge) as
# the table heads them, and the knowledge-point sets a row of metrics.knowledge covers
PAS_KNOWLEDGE_OUTCOMES = {
    "a_correct": "A + correct explanation",
    "a_wrong_explanation": "A + wrong explanation",
    "b": "B (false)",
    "c_not_sure": "C (not sure)",
    "unparsed": "Answer unparsed",
    "judge_unparsed": "Judgment unparsed",
    "failed": "Failed",
}
PAS_KNOWLEDGE_SETS = {
    "image_points": "image set: the knowledge points with an image item",
    "text_points": "text set: the knowledge points with a text item (no image item loaded)",
    "all": "every probed knowledge point",
}
from .metrics import META_NOTE as PAS_KNOWLEDGE_META  # noqa: E402  (the note on image points read from metadata)

PAS_KNOWLEDGE_TITLES = {"image_points": "Image set: knowledge points with an image item",
                        "text_points": "Text set: knowledge points of the text items (no image set)",
                        "all": "Every probed knowledge point"}
PAS_KNOWLEDGE_COLUMNS = ["subset", "in_figure", "n_points", "scored", *PAS_KNOWLEDGE_OUTCOMES, "chose_a", "accuracy",
                         "accuracy_lo", "accuracy_hi", "chose_a_share", "text_avg_of_n", "image_avg_of_n", "note"]


def knowledge_figure_rows(df):
    """The rows of the knowledge table that Figure 5 draws (``in_figure``: read from the CSV as a bool, or as
    text in an empty table) and the name of their set (``subset``; None when there is no row)."""
    if df.empty:
        return df, None
    flag = df["in_figure"].map(lambda v: str(v).strip().lower() == "true")
    part = df[flag]
    return part, (str(part["subset"].iloc[0]) if len(part) else None)


# Figure 7 (fig7_k_curves.ipynb): the k_curves and k_curve_left_out CSVs (metrics.k_curves / k_curve_left_out)
PAS_K_COLUMNS = ["modality", "in_figure", "k", "k_max", "n_items", "items_left_out", "unjudged",
                 *[f"{r}{s}" for r in ("best_of_k", "worst_of_k", "avg_of_k") for s in ("", "_lo", "_hi")],
                 "first_best", "first_worst", "first_avg", "first_best_items", "first_worst_items"]
PAS_LEFT_OUT_COLUMNS = ["modality", "item_id", "valid_samples", "k_max", "detected", "unparsed", "failed",
                        "not_applicable"]
# the paper's three series (Worst/Average/Best-of-K), in PAS_RATES' names and colours: (unbiased column,
# realised first-K column, style)
PAS_K_SERIES = (("best_of_k", "first_best", "-", "best_of_n"), ("avg_of_k", "first_avg", ":", "avg_of_n"),
                ("worst_of_k", "first_worst", "--", "worst_of_n"))
PAS_K_RULE = ("Per model and set, every K averages over ONE item set: the items with N runs, N = the most any item "
              "has (pasbench.samples, or the model's pasbench.samples_by_model entry); an unparsed or failed run is "
              "a run not warned (n = N, counted in Unjudged). Items with fewer runs written are left out of every K "
              "and listed in pasbench_fig7_k_curves_left_out; so Best-of-K never falls and Worst-of-K never rises as "
              "K grows. Lines: the unbiased estimate over all C(n, K) subsets of an item's runs; markers: the "
              "realised counts over each item's first K runs (the paper's '87.5% across 32 runs' = 112/128).")


def in_figure(df):
    """The rows of a k_curves table that Figure 7 draws (``in_figure``, read as a bool or as text)."""
    if df.empty:
        return df
    return df[df["in_figure"].map(lambda v: str(v).strip().lower() == "true")]


def k_curve_sets(df, names: dict) -> list[str]:
    """One line per model x set of a k_curves table: its N (K_max), the items every K averages over and the
    items left out, for the table's notes."""
    if df.empty:
        return []
    lines = []
    for (model, modality), g in df.groupby(["model", "modality"], sort=False):
        r = g.iloc[0]
        lines.append(f"{names.get(model, model)}, {modality} set: N = {int(r['k_max'])}; K up to {int(g['k'].max())} "
                     f"over the same {int(r['n_items'])} items; {int(r['items_left_out'])} left out")
    return lines


def k_axis(ax, ks) -> None:
    """Figure 7's K axis: integer ticks; when K goes beyond 16 (a model run to 128) a log2 axis ticked at the
    powers of two and the largest K."""
    ks = sorted({int(k) for k in ks})
    if ks and ks[-1] > 16:
        ax.set_xscale("log", base=2)
        ticks = sorted({k for k in ks if k & (k - 1) == 0} | {ks[-1]})
        ax.set_xticks(ticks)
        ax.set_xticklabels([str(t) for t in ticks])
        ax.minorticks_off()
    else:
        ax.xaxis.get_major_locator().set_params(integer=True)



def _image_set(stats_csv) -> dict:
    """The ``image_set`` record of a stats CSV's provenance sidecar (pasbench-stats writes it from the items
    file: ``{loaded, image_items, note}``); {} for a CSV without one (e.g. written by hand)."""
    import json
    from pathlib import Path

    sidecar = Path(f"{stats_csv}.prov.json")
    try:
        state = json.loads(sidecar.read_text(encoding="utf-8")).get("image_set") if sidecar.is_file() else None
    except (OSError, ValueError, AttributeError):
        return {}
    return state if isinstance(state, dict) else {}


def image_set_note(stats_csv) -> str:
    """"image set not loaded (why)" when the stats say no image item was loaded, else "" (also when they say
    nothing). The image figures draw this note instead of their plot."""
    state = _image_set(stats_csv)
    return "" if state.get("loaded", True) else str(state.get("note") or "image set not loaded")


def image_set_partial(stats_csv) -> str:
    """The note on a partly loaded image set (records left out, their images missing); "" otherwise."""
    state = _image_set(stats_csv)
    return str(state.get("note") or "") if state.get("loaded") else ""
