"""AURA-Eval's notebook helpers (notebooks/aura/*.ipynb): Table 33's columns and cells, which Table 38 reuses
per prompt format. The generic reading / formatting / figure helpers are the core's ``aura.notebook_helpers``."""
from __future__ import annotations

import pandas as pd

from aura.notebook_helpers import share_cell

# Table 33's columns (stats.metrics.TABLE33) as the report shows them; Table 38 reuses them per prompt format.
TABLE33_TITLES = {
    "unsafe_all": "Unsafe % (all)",
    "unsafe_nsp": "Unsafe % (NSP)",
    "unsafe_sp": "Unsafe % (SP)",
    "sp_safe_nonrefusal": "SP safe non-refusal % [of SP Safe: ≠A5]",
    "sp_overrefusal": "SP over-refusal % [of SP Safe: A5]",
    "nsp_risk_aware": "NSP risk aware % [D2/D3]",
    "nsp_aware_unsafe": "NSP aware-unsafe % [D2/D3&U]",
    "nsp_miss_execute": "NSP miss+execute % [D0–A0&U]",
}
TABLE33_NOTE = ("Cells: % (k/n, excl.). n = the metric's denominator: rows with a valid safety label (unsafe columns); "
                "SP rows judged Safe with a valid action type (the two SP-Safe columns, which sum to 100%); NSP rows "
                "with every label the metric needs (NSP columns). excl. = rows of the population lacking such a label "
                "(unresolved panel label, unparsed or failed rollout); SP rows judged Unsafe are outside the SP-Safe "
                "population. n/a: not applicable (no detection label exists without a thought).")


def table33_cells(df: pd.DataFrame) -> pd.DataFrame:
    """One formatted column per Table 33 metric for the rows of `df` (the stage's ``<metric>_k/_n/_excluded``
    columns); a metric whose n is missing (not applicable) shows "n/a"."""
    out = pd.DataFrame(index=df.index)
    for key, title in TABLE33_TITLES.items():
        out[title] = ["n/a" if pd.isna(n) else share_cell(k, n, e)
                      for k, n, e in zip(df[f"{key}_k"], df[f"{key}_n"], df[f"{key}_excluded"])]
    return out


TABLE33_COLUMNS = ["rows", "rows_nsp", "rows_sp", "pair_label_invalid", "detection_invalid", "action_invalid",
                   "safety_invalid", *[f"{k}_{s}" for k in TABLE33_TITLES for s in ("k", "n", "excluded")]]


def dimension_names() -> dict[str, str]:
    """Code -> "RS1 Harm Intensity" for the eleven variation dimensions (the definitions the construction prompts
    render, prompts/aura/construct/dimensions.v1.yaml), and "original" for the unvaried rows."""
    from .dimensions import dimension_specs

    return {"original": "original", **{code: f"{code} {spec['name']}" for code, spec in dimension_specs().items()}}
