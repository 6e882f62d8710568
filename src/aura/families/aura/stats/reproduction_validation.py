"""The AURA reproduce stage's mappers of the paper's validation and side analyses (``reproduction``): human
validation and judge accuracy (Tables 3, 18, 20-23), vendor overlap (Table 24), the judges' consistency (Table 25),
the prompt format (Table 38), the case study (Table 34). ``MAPPERS``: reference file -> ``mapper(row, tables)``."""
from __future__ import annotations

import re

from aura.stats.verdict import Z95, Estimate, bootstrap_estimate

from .reproduction_support import (AXIS, CASE_STUDY, DROP_REASON, FORMATS, FORMAT_GROUPS, FORMAT_MODELS, OTHER,
                                   OTHER_ENSEMBLE, PAPER_JUDGES, VALIDATION_JUDGES, count_of, difference_of,
                                   first_row, is_missing, per_model, range_end, range_over, rate_se, wilson_of)


# --- human_validation.csv, judge_accuracy.csv, ensembles.csv (Tables 3, 18, 20-23) ------------------------------
def _panel(t):
    """"different models" unless the run's validation panel (Tables 21-22's judges) is the paper's 5 judges; None
    when it is (or the run has no such table)."""
    acc = t["table21_22_judge_accuracy"]
    judges = set(acc["judge"]) if len(acc) else set(VALIDATION_JUDGES)
    if judges != set(VALIDATION_JUDGES):
        return (f"different models: the paper's panel is its 5 validation judges ({', '.join(VALIDATION_JUDGES)}); "
                f"the run's: {', '.join(sorted(judges))}")
    return None


def _stratum(t, stratum: str, axis: str = "overall"):
    """One judge's row of Tables 21-22 (the strata's units are the same for every judge)."""
    acc = t["table21_22_judge_accuracy"]
    return first_row(acc, axis=axis, stratum=stratum) if len(acc) else None


def _normal(value, se, n, unit="fraction", method="normal"):
    """A point with a standard error and its normal 95% interval (a fraction's kept inside [0, 1])."""
    lo, hi = float(value) - Z95 * se, float(value) + Z95 * se
    if unit == "fraction":
        lo, hi = max(lo, 0.0), min(hi, 1.0)
    return Estimate(float(value), lo, hi, int(n), unit, method, se=se)


def _agreement(r, m: str):
    """P_o with its standard error bounded by sqrt(P_o (1 - P_o) / N) (a mean of per-unit shares in [0, 1]);
    Krippendorff's alpha with se(P_o) (1 - alpha) / (1 - P_o) (the delta method, the expected agreement fixed)."""
    p, n = r["P_o"], r["N"]
    if is_missing(p) or not n or (m == "alpha" and (is_missing(r["alpha"]) or p >= 1)):
        return None
    se = rate_se(Estimate(p, p, p, int(n)))
    if m == "P_o":
        return _normal(p, se, n, method="mean of pairwise agreements")
    return _normal(r["alpha"], se * (1 - r["alpha"]) / (1 - p), n, "r", "delta method on P_o")


def _wilson_bound(k, n, low: bool):
    """A Wilson bound of k/n with the accuracy's standard error, shrunk by n / (n + z^2) as Wilson's centre is."""
    est = wilson_of(k, n)
    if est is None:
        return None
    return _normal(est.lo if low else est.hi, rate_se(est) * n / (n + Z95 ** 2), n, method="Wilson bound")


def _human_validation(row, t):
    m, axis = row["measures"], AXIS.get(row["row"], "overall")  # the human consensus strata: overall
    if m == "units_dropped" and row["row"] not in AXIS:  # a drop reason
        return DROP_REASON
    t3, t18 = t["table3_human_validation"], t["table18_validation_retention"]
    if m in ("units_sampled", "N", "units_dropped"):  # Table 18: sampled, kept, dropped
        r, total = first_row(t18, axis=axis), first_row(t18, axis="overall")
        if r is None:
            return None
        if m == "units_sampled":
            return count_of(r["sampled"], row)
        column = "kept" if m == "N" else "dropped"
        return count_of(r[column], row, total["sampled"] if axis == "overall" else total[column])
    r = first_row(t3, axis=axis)
    if r is None:
        return None
    if m == "annotators":
        return count_of(r["raters"], row)
    if m == "raters":  # ratings per unit
        return count_of(r["ratings"] / r["units"], row) if r["units"] else None
    if m == "human_consensus":
        return count_of(r[f"human_{row['row']}"], row, r["N"])
    if m in ("P_o", "alpha"):
        return _agreement(r, m)
    different = _panel(t)  # every other row is the 5-judge panel's
    if different:
        return different
    n_p, unanimous, agree, agree_u = r["N_p"], r["N_unanimous"], r["agree"], r["agree_unanimous"]
    if m == "T":
        s, total = _stratum(t, "tied"), _stratum(t, "all")
        return count_of(s["units"], row, total["units"]) if s is not None else None
    return {"N_p": lambda: count_of(n_p, row, r["N"] - r["no_reference"]),
            "acc": lambda: wilson_of(agree, n_p),
            "agree": lambda: count_of(agree, row, n_p),
            "acc_ci_low": lambda: _wilson_bound(agree, n_p, low=True),
            "acc_ci_high": lambda: _wilson_bound(agree, n_p, low=False),
            "N_unanimous": lambda: count_of(unanimous, row, n_p),
            "N_majority": lambda: count_of(n_p - unanimous, row, n_p),
            "acc_unanimous": lambda: wilson_of(agree_u, unanimous),
            "agree_unanimous": lambda: count_of(agree_u, row, unanimous),
            "acc_majority": lambda: wilson_of(agree - agree_u, n_p - unanimous),
            "agree_majority": lambda: count_of(agree - agree_u, row, n_p - unanimous)}.get(m, lambda: OTHER)()


def _judge_accuracy(row, t):
    acc = t["table21_22_judge_accuracy"]
    if acc.empty:
        return None
    different = _panel(t)
    if different:
        return different
    m, overall = row["measures"], acc[(acc["axis"] == "overall") & (acc["stratum"] == "all")]

    def extreme(high: bool):
        return range_end({"column": "high" if high else "low"},
                    per_model(overall, lambda g: wilson_of(g.iloc[0]["agree"], g.iloc[0]["units"]), "judge"))
    if m == "acc" and row["model"]:  # a named judge on a stratum ("accuracy, majority stratum")
        stratum = row["column"].split(", ")[1].split()[0]
        r = first_row(acc, judge=row["model"], axis="overall", stratum=stratum)
        return wilson_of(r["agree"], r["units"]) if r is not None else None
    if m == "acc":
        return extreme(row["row"].startswith("best"))
    if m == "acc_spread":
        return difference_of(extreme(True), extreme(False))
    s, total = _stratum(t, row["row"]), _stratum(t, "all")
    if s is None:
        return None
    return count_of(s["units"], row, total["units"]) if m == "units" else count_of(s["agree"], row, s["units"])


def _ensembles(row, t):
    if not row["row"].startswith("GPT-5.4 + Claude Opus 4.6 + Gemini 3.1 Pro") or row["measures"] == "N_u_growth":
        return OTHER_ENSEMBLE
    t23 = t["table23_ensembles"]
    if t23.empty:
        return None
    hit = t23[[set(e.split(" + ")) == set(PAPER_JUDGES) for e in t23["ensemble"]]]
    if hit.empty:
        return f"different models: the run's validation panel has no {' + '.join(PAPER_JUDGES)} ensemble"
    r, m = hit.iloc[0], row["measures"]
    return {"N_p": lambda: count_of(r["N_p"], row, r["units"]), "N_u": lambda: count_of(r["N_u"], row, r["N_p"]),
            "acc": lambda: wilson_of(r["agree"], r["N_p"]), "T": lambda: count_of(r["T"], row, r["units"])
            }.get(m, lambda: OTHER)()


# --- vendor_overlap.csv, judge_consistency.csv, prompt_format.csv, case_study.csv (Tables 24, 25, 38, 34) -------
def _vendor_overlap(row, t):
    t24, m = t["table24_vendor_overlap"], row["measures"]
    if t24.empty:
        return None
    if m == "sample_items":
        return count_of(t24["sample_items"].max(), row)
    if m == "ci_includes_zero":
        inside = t24["ci_includes_zero"].astype(str).str.lower() == "true"
        return count_of(int(inside.sum()), row, len(t24))
    if m == "diff":  # |original - replacement|: the paper states no sign
        r = first_row(t24, model=row["model"])
        if r is None:
            return None
        d, lo, hi = (float(r[c]) for c in ("diff", "diff_ci_low", "diff_ci_high"))
        return bootstrap_estimate(*((d, lo, hi) if d >= 0 else (-d, -hi, -lo)), int(r["paired_n"]))
    return OTHER


def _judge_consistency(row, t):
    t25 = t["table25_judge_consistency"]
    part = t25[t25["axis"] != "all"] if len(t25) else t25
    return range_over(row, part, PAPER_JUDGES, "Table 25's range over judges x axes",
                  lambda g: range_end(row, [wilson_of(r["consistent"], r["complete"]) for _, r in g.iterrows()]),
                  key="judge")


def _format_rate(m: str):
    return lambda r: wilson_of(r[f"{m}_k"], r[f"{m}_n"])


def _prompt_format(row, t):
    t38, m = t["table38_prompt_format"], row["measures"]
    if t38.empty:
        return None
    if m == "items":
        return count_of(t38["items"].max(), row)
    if m == "unsafe_all":  # "frontier models [R]": the group's range under one prompt
        group, fmt = re.match(r"(.+) models \[(\w)\]", row["row"]).groups()
        part = t38[t38["format"] == FORMATS[fmt]]
        return range_over(row, part, FORMAT_GROUPS[group], f"the {group} models' range",
                      lambda g: _format_rate(m)(g.iloc[0]))

    def per_row(estimate):  # the range over the tested models and both prompts
        return range_over(row, t38, FORMAT_MODELS, "Table 38's range over its models",
                      lambda g: range_end(row, [estimate(r) for _, r in g.iterrows()]))
    if m == "unsafe_all_delta":  # [A] - [R] per model
        def increase(g):
            action_only, react = (first_row(g, format=f) for f in ("action_only", "react"))
            if action_only is None or react is None:
                return None
            return difference_of(_format_rate("unsafe_all")(action_only), _format_rate("unsafe_all")(react))
        return range_over(row, t38, FORMAT_MODELS, "Table 38's range over its models", increase)
    if m == "nsp_sp_gap":
        return per_row(lambda r: difference_of(_format_rate("unsafe_nsp")(r), _format_rate("unsafe_sp")(r)))
    if m == "sp_safe_nonrefusal":
        return per_row(_format_rate(m))
    return OTHER


def _case_study(row, t):
    return CASE_STUDY


MAPPERS = {"human_validation.csv": _human_validation, "judge_accuracy.csv": _judge_accuracy,
           "ensembles.csv": _ensembles, "vendor_overlap.csv": _vendor_overlap,
           "judge_consistency.csv": _judge_consistency, "prompt_format.csv": _prompt_format,
           "case_study.csv": _case_study}
