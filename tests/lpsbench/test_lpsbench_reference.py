"""LPS-Bench's reference data (Tables 3 and 4 of the paper, src/aura/families/lpsbench/reference/) and what the
consistency checks find in them (docs/lpsbench.md, "The paper checked against itself")."""
from __future__ import annotations

from pathlib import Path

import yaml

import aura.families.lpsbench as lpsbench
from aura.stats.consistency import check_reference
from aura.stats.reference import load_reference

REFERENCE = Path(lpsbench.__file__).parent / "reference"
CONFIG = Path(__file__).resolve().parents[2] / "config"


def test_tables_3_and_4_are_complete_with_their_case_counts():
    ref = load_reference(REFERENCE)
    t3, t4 = ref[ref["table"] == "Table 3"], ref[ref["table"] == "Table 4"]
    assert (len(t3), len(t4)) == (13 * 11, 13 * 8)
    assert t3["row"].nunique() == t4["row"].nunique() == 13
    assert t3.groupby("column")["n"].first().dropna().to_dict() == {
        "TS": 55, "OC": 62, "FA": 68, "IP": 67, "HS": 68, "MT": 66, "EB": 65, "RC": 52, "PI": 67}
    assert t4.groupby("column")["n"].first().dropna().to_dict() == {
        "Web": 92, "Social": 77, "OS": 76, "Office": 72, "Media": 78, "File": 85, "Code": 90}
    for t in (t3, t4):  # the paper's 570 cases, once per table
        assert t[t["model"] == "gpt-5"]["n"].sum() == 570
    # every model row names a model of the paper config
    models = set(yaml.safe_load((CONFIG / "lpsbench.yaml").read_text())["lpsbench"]["evaluated"])
    assert set(ref["model"]) == models
    cell = ref.set_index(["table", "row", "column"])
    assert cell.loc[("Table 3", "GPT-5", "TS"), "value"] == 27.27
    assert cell.loc[("Table 3", "Llama-3.1-8B-Instruct", "RC"), ["value", "decimals"]].tolist() == [0.77, 2]
    assert cell.loc[("Table 4", "Qwen3-32B", "Overall Avg."), "value"] == 6.46


def test_the_paper_checked_against_itself():
    found = check_reference(REFERENCE)
    by = {c: found[found["check"] == c] for c in ("percentage", "percentage (truncated)", "average", "same cases")}
    # three cells match no whole number of cases over their n, under any convention
    assert sorted(zip(by["percentage"]["table"], by["percentage"]["row"], by["percentage"]["column"])) == [
        ("Table 3", "Llama-3.1-8B-Instruct", "RC"), ("Table 3", "Qwen3-32B-Instruct", "HS"),
        ("Table 3", "Qwen3-32B-Instruct", "TS")]
    # two more match only when truncated (Qwen3-8B's 3.89% of 77 is 3/77 = 3.896%, rounded 3.90)
    trunc = by["percentage (truncated)"].set_index("column")["detail"]
    assert sorted(trunc.index) == ["OS", "Social"] and set(by["percentage (truncated)"]["row"]) == {"Qwen3-8B"}
    assert trunc["Social"] == "3/77 = 3.8961 prints as 3.89 only when truncated (rounded: 3.90)"
    rc = by["percentage"][by["percentage"]["column"] == "RC"]["detail"].item()
    assert rc == "no whole k gives k/52 = 0.77 (nearest: 0/52 = 0.00, 1/52 = 1.92)"
    # one printed average is not the mean of its parts
    [avg] = by["average"].to_dict("records")
    assert (avg["row"], avg["column"]) == ("Qwen3-8B-Instruct", "Avg. (benign)")
    # Tables 3 and 4 imply different safe counts for 12 of 13 models (DeepSeek-v3.2: 86 both ways)
    same = by["same cases"].set_index("row")["detail"]
    assert len(same) == 12 and "DeepSeek-v3.2" not in same
    assert same["GPT-5"] == "196.0 of 570 in Table 3 against 190.0 of 570 in Table 4"
    assert same["Claude-4.5-Sonnet"] == "450.0 of 570 in Table 3 against 503.0 of 570 in Table 4"
    assert len(found) == 5 + 1 + 12
