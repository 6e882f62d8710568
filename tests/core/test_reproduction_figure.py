"""The reproduction report's figure and tables (aura.notebook_helpers.forest, reproduction_report) and the viewer's
verdict table (reproduction.html), on synthetic verdict frames: a family's verdict fits one screen."""
import io

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pandas as pd
import pytest
from matplotlib.image import imread

from aura.notebook_helpers import VERDICT_COLORS, forest, reproduction_report
from aura.stats.consistency import FINDING_COLUMNS
from aura.stats.verdict import OUTCOMES, VERDICT_COLUMNS

MODELS = ["GPT-4o", "GPT-4o-mini", "Claude-3.5-Sonnet", "Gemini-1.5-Pro", "Llama-3.1-70B-Instruct",
          "Llama-3.1-8B-Instruct", "Qwen2.5-72B-Instruct", "Qwen2.5-7B-Instruct", "Mistral-Large", "DeepSeek-V3",
          "o1-mini", "Gemma-2-27B", "Phi-3.5"]
COLUMNS = ["Physical harm", "Privacy", "Fraud", "Misinformation", "Cyber", "Bias", "Self-harm", "Illegal", "Hate",
           "Avg. (benign)", "Avg. (adversarial)"]
MARGIN = {"percent": 10.0, "fraction": 0.1, "count": None, "r": 0.1}


def judged(rng, table, row, column, unit, reported=50.0, deterministic=False):
    """One row with a verdict: a difference, its interval (none when deterministic) and the margin, the verdict
    read off them as aura.stats.verdict would (the figure only draws what it is given)."""
    margin = MARGIN[unit] or 0.1 * reported
    d = float(rng.normal(0, margin))
    half = 0.0 if deterministic else float(abs(rng.normal(margin, margin / 3)))
    lo, hi = d - half, d + half
    verdict = ("reproduced" if -margin < lo and hi < margin else
               "not reproduced" if deterministic or lo > 0 or hi < 0 else "inconclusive")
    return {"table": table, "row": row, "column": column, "model": row, "measures": column, "kind": "rate",
            "unit": unit, "reported": reported, "reported_n": 200, "n_basis": "stated", "reproduced": reported + d,
            "lo": reported + d - 3, "hi": reported + d + 3, "n": 200, "method": "newcombe", "difference": d,
            "diff_lo": None if deterministic else lo, "diff_hi": None if deterministic else hi, "margin": margin,
            "p_value": None if deterministic else 0.2, "p_adjusted": None if deterministic else 0.6,
            "verdict": verdict, "n_to_decide": 400 if verdict == "inconclusive" else None, "reason": ""}


def not_comparable(table, row, column, unit="percent", reason="demo data: demo_seeds"):
    return {"table": table, "row": row, "column": column, "unit": unit, "reported": 50.0,
            "verdict": "not comparable", "reason": reason}


def frame(rows) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=VERDICT_COLUMNS)


def lps_like(n=250) -> pd.DataFrame:
    """n judged rows: 13 models x 11 columns in percent (Table 3), then 13 x 9 in fraction (Table 4)."""
    rng = np.random.default_rng(0)
    rows = [judged(rng, table, m, c, unit) for table, unit, cols in (("Table 3", "percent", COLUMNS),
                                                                      ("Table 4", "fraction", COLUMNS[:9]))
            for m in MODELS for c in cols]
    return frame(rows[:n])


def aura_like() -> pd.DataFrame:
    """Many small tables, every unit, counts from 1 to 1000 (some without sampling error), a fifth not comparable,
    long labels."""
    rng = np.random.default_rng(1)
    rows = []
    for t in range(24):
        unit = ("percent", "count", "count", "percent", "fraction", "r")[t % 6]
        for i in range(int(rng.integers(1, 12))):
            row, column = ("frontier models" if i % 2 else "safe"), f"unsafe drop at D{i}, low, over every seed"
            if rng.random() < 0.2:
                rows.append(not_comparable(f"App. {t} text", row, column, unit, "model unavailable: no key"))
            else:
                reported = float(round(10 ** rng.uniform(0, 3))) if unit == "count" else 0.5
                rows.append(judged(rng, f"App. {t} text", row, column, unit, reported, unit == "count" and i % 3 == 0))
    return frame(rows)


def report(tmp_path, verdicts: pd.DataFrame, family="lpsbench"):
    """reproduction_report on `verdicts` written as the stage writes them; returns the PNG's (height, width)."""
    verdicts.to_csv(tmp_path / "verdicts.csv", index=False)
    pd.DataFrame(columns=FINDING_COLUMNS).to_csv(tmp_path / "consistency.csv", index=False)
    reproduction_report(tmp_path / "verdicts.csv", tmp_path / "consistency.csv", family, "repro", tmp_path / "tables",
                        tmp_path / "fig.pdf", tmp_path / "fig.png")
    return imread(tmp_path / "fig.png").shape[:2]


def test_every_outcome_has_its_colour():
    assert list(VERDICT_COLORS) == list(OUTCOMES)


def test_250_judged_rows_fit_one_screen_and_the_tables_explain_the_outcomes(tmp_path, capsys):
    height, width = report(tmp_path, lps_like())
    assert height <= 2500 and width <= 3300, (height, width)
    out = capsys.readouterr().out
    assert "lpsbench: of 250 reported numbers" in out
    for name in ("repro", "repro_consistency"):
        assert (tmp_path / "tables" / f"{name}.csv").is_file() and (tmp_path / "tables" / f"{name}.md").is_file()
    assert len(pd.read_csv(tmp_path / "tables" / "repro.csv")) == 250
    notes = (tmp_path / "tables" / "repro.md").read_text()
    assert "lpsbench: of 250 reported numbers" in notes
    for outcome in ("reproduced:", "not reproduced:", "inconclusive:", "not comparable:"):
        assert outcome in notes
    assert "±margin" in notes and "Holm" in notes and "n_to_decide" in notes and (tmp_path / "fig.pdf").is_file()


def test_many_small_tables_in_every_unit_fit_one_screen(tmp_path):
    height, width = report(tmp_path, aura_like(), "aura")
    assert height <= 2500 and width <= 3300, (height, width)


def test_the_detail_draws_only_the_judged_rows_one_axis_per_unit_under_table_headers():
    rng = np.random.default_rng(2)
    rows = frame([judged(rng, "T", "m", "A", "percent"), not_comparable("T", "m", "B"),
                  judged(rng, "T", "m", "C", "percent", deterministic=True), judged(rng, "F", "x", "r", "r"),
                  judged(rng, "U", "y", "A", "percent")])
    fig = forest(rows, title="the summary line")
    summary, *detail = fig.axes
    assert [t.get_text() for t in summary.get_yticklabels()] == ["T", "F", "U"]
    assert "the summary line" in [t.get_text() for t in fig.texts]
    labels = [[t.get_text() for t in ax.get_yticklabels()] for ax in detail]
    assert labels == [["T", "m · A", "m · C", "U", "y · A"], ["F", "x · r"]]  # m · B: not comparable, not drawn
    assert [ax.get_xlabel() for ax in detail] == ["difference, percentage points (run − paper)",
                                                 "difference in r (run − paper)"]


def test_a_run_without_any_verdict_draws_the_summary_and_says_why(tmp_path, capsys):
    rows = frame([not_comparable("Table 3", m, c) for m in MODELS for c in COLUMNS])
    height, width = report(tmp_path, rows)
    assert height <= 600 and width <= 1500, (height, width)
    assert f"lpsbench: not comparable, no verdict: all {len(rows)} reported numbers (demo data: demo_seeds)" in capsys.readouterr().out
    fig = forest(rows)
    assert len(fig.axes) == 1
    assert any("demo data: demo_seeds" in t.get_text() for t in fig.texts)
    assert forest(rows.iloc[0:0]).axes[0].texts[0].get_text() == "no reference numbers to compare"


@pytest.fixture
def template():
    from aura.web.viewer.pages import _safe, environment

    return lambda verdicts: environment({}).get_template("reproduction.html").render(
        family="aura", verdicts=verdicts, titles={"aura": "AURA-Eval"}, anchor=_safe)


def test_the_viewer_table_shows_the_difference_its_interval_the_margin_and_the_counts(template):
    rng = np.random.default_rng(3)
    row = {**judged(rng, "§7.1 text", "A", "unsafe", "percent"), "reported": 16.9, "reproduced": 18.2, "lo": 15.9,
           "hi": 20.7, "n": 1000, "difference": 1.3, "diff_lo": -2.0, "diff_hi": 4.6, "margin": 10.0,
           "verdict": "reproduced"}
    exact = {**judged(rng, "§4 text", "all", "models evaluated", "count", 36.0, deterministic=True),
             "difference": 0.0, "margin": 0.0, "verdict": "reproduced"}
    text = io.StringIO()
    frame([row, exact, not_comparable("§7.1 text", "B", "unsafe")]).to_csv(text, index=False)
    html = template(pd.read_csv(io.StringIO(text.getvalue()), keep_default_na=False))  # as the viewer reads it
    assert ("Of 3 reported numbers: 2 reproduced, 0 not reproduced, 0 inconclusive, 1 not comparable." in html)
    assert "[15.9, 20.7]" in html and ">1000<" in html and "1.3 [-2, 4.6]" in html and "±10" in html
    assert '<td class="num">0</td>' in html and "demo data: demo_seeds" in html


def test_p_values_and_alpha_get_their_own_axes():
    # issue 49: a p-value (reported as a fraction) shared the rates' fraction axis, Krippendorff's alpha (in units
    # of r) the correlations'; each is drawn on an axis of its own, named for what it is
    rng = np.random.default_rng(1)
    rows = [judged(rng, "Table 1", "m", "accuracy", "fraction"), judged(rng, "§4 text", "models", "p-value", "fraction"),
            judged(rng, "§6 text", "Overall", "alpha", "r"), judged(rng, "§4 text", "models", "Pearson r", "r")]
    fig = forest(frame(rows))
    labels = {ax.get_xlabel().split("\n")[0] for ax in fig.axes}
    assert {"difference, fraction (run − paper)", "difference in p-value (run − paper)", "difference in r (run − paper)",
            "difference in Krippendorff's α (run − paper)"} <= labels
    matplotlib.pyplot.close(fig)
