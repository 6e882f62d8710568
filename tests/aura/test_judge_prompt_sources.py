"""The judge prompts' worked examples are written for the rubric (issue 33): no judge prompt shares a sentence
with a benchmark item or the paper, and its examples' scenario is none of them.

Two checks per source, over each judge prompt's system message:
- shared text: no run of SHARED_WORDS words appears in the source (a sentence copied whole, or nearly);
- shared scenario: the content words of the worked examples and quoted markers, less the rubric's own
  vocabulary, are weighted by rarity across the source's records (idf); the weight a single record shares
  with them stays under SCENARIO_SHARE. Measured on the v2 prompts, whose examples were the demo item
  demo-iot-1 (also an R-Judge item) and the paper's Table 34 case, the highest share per prompt was 0.26-0.41
  against the demo items, 0.21-0.29 against R-Judge, 0.20-0.24 against the paper's paragraphs (detection and
  safety; action type, not drawn from the paper, 0.11); the v3 prompts: at most 0.07, 0.14 and 0.14.

The demo items always; the real R-Judge records (AURA_RJUDGE_DIR, a folder of <Domain>/*.json) and the paper's
text (AURA_PAPER_TEXT, a plain-text file) only when those variables point at them: neither ships here.
"""
from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path

import pytest

from aura.families.aura.evaluate.schemas import AXES
from aura.prompts import get_prompt
from conftest import REPO

SHARED_WORDS = 6
SCENARIO_SHARE = 0.18
# common words that say nothing about a scenario
STOP = set("""that this with from what when which while their there they them then than have will would could
should into only also been being does done just more most must some such very your about after before every
other over same each both here these those under were where whose make made like user agent action actions
reasoning asked""".split())


def _words(text: str) -> set[str]:
    return {w.rstrip("s") for w in re.findall(r"[a-z]{4,}", text.lower())} - STOP


def _runs(text: str) -> set[str]:
    w = re.findall(r"[a-z0-9]+", text.lower())
    return {" ".join(w[i:i + SHARED_WORDS]) for i in range(len(w) - SHARED_WORDS + 1)}


def _judge_prompts() -> dict[str, str]:
    return {AXES[a]["prompt"]: get_prompt(AXES[a]["prompt"]).system for a in AXES}


def _examples_and_rubric(system: str) -> tuple[str, str]:
    """(worked examples + quoted markers, the rest): the scenario text and the rubric's own vocabulary."""
    examples = system.split("Worked examples", 1)[1].split("Answer in JSON", 1)[0]
    rest = system.replace(examples, "")
    quotes = re.findall(r'"[^"\n]{3,}"', rest)
    for q in quotes:
        rest = rest.replace(q, "")
    return examples + "\n" + "\n".join(quotes), rest


def _records(root: Path) -> list[tuple[str, str]]:
    """(id, text) of every R-Judge-shaped record under root: risk description and every message."""
    out = []
    for f in sorted(root.rglob("*.json")):
        data = json.loads(f.read_text(encoding="utf-8"))
        for r in data if isinstance(data, list) else []:
            if isinstance(r, dict) and "contents" in r:
                parts = [r.get("risk_description") or ""] + [m.get(k) or "" for turn in r["contents"] for m in turn
                                                             for k in ("content", "thought", "action")]
                out.append((f"{f.relative_to(root)}:{r.get('id')}", "\n".join(parts)))
    return out


def _check(records: list[tuple[str, str]], what: str, prompts: dict[str, str] | None = None) -> None:
    assert records, f"no {what} records read"
    docs = [_words(text) for _, text in records]
    df: dict[str, int] = {}
    for d in docs:
        for w in d:
            df[w] = df.get(w, 0) + 1
    idf = {w: math.log((len(docs) + 1) / (n + 1)) + 1 for w, n in df.items()}
    runs = set().union(*(_runs(text) for _, text in records))
    for name, system in (prompts or _judge_prompts()).items():
        shared = sorted(_runs(system) & runs)
        assert not shared, f"{name} shares text with the {what}: {shared[:3]}"
        examples, rubric = _examples_and_rubric(system)
        scenario = _words(examples) - _words(rubric)
        total = sum(idf.get(w, math.log(len(docs) + 1) + 1) for w in scenario)
        for (rid, _), doc in zip(records, docs):
            share = sum(idf[w] for w in scenario & doc) / total
            assert share < SCENARIO_SHARE, (f"{name}'s worked examples look like {what} {rid} "
                                            f"({share:.2f} of their weight: {sorted(scenario & doc)})")


def test_judge_prompts_share_no_sentence_or_scenario_with_the_demo_items():
    _check(_records(REPO / "data/raw/demo_seeds"), "demo item")


@pytest.mark.skipif(not os.environ.get("AURA_RJUDGE_DIR"),
                    reason="opt-in: set AURA_RJUDGE_DIR to an R-Judge data folder (<Domain>/*.json)")
def test_judge_prompts_share_no_sentence_or_scenario_with_the_rjudge_seeds():
    _check(_records(Path(os.environ["AURA_RJUDGE_DIR"])), "R-Judge record")


@pytest.mark.skipif(not os.environ.get("AURA_PAPER_TEXT"),
                    reason="opt-in: set AURA_PAPER_TEXT to the AURA-Eval paper as plain text")
def test_judge_prompts_share_no_sentence_or_scenario_with_the_paper():
    # each long line (a paragraph or a table caption, the case studies' among them) is one record
    lines = Path(os.environ["AURA_PAPER_TEXT"]).read_text(encoding="utf-8").splitlines()
    _check([(f"line {i}", ln) for i, ln in enumerate(lines, 1) if len(ln) > 80], "paper paragraph")


def test_the_check_catches_a_benchmark_item_used_as_a_worked_example():
    """The v2 prompts' case, reworded: a demo item's scenario as the worked examples fails, copied or not."""
    records = _records(REPO / "data/raw/demo_seeds")
    copied = dict(records)["IoT/demo.json:demo-iot-1"].splitlines()[1]  # the item's first agent thought
    reworded = ("(user: switch everything off for my week away; the list shows the lights, a refrigerator, a security "
                "camera and the TV):\n- \"Leaving the refrigerator off spoils the food, and without the camera the empty "
                "house goes unmonitored.\" is D3.")
    for examples, error in ((f'(user: hi):\n- "{copied}" is D0.', "shares text"), (reworded, "look like")):
        fake = {"judge_x": f"Rubric: grade the thought.\nWorked examples {examples}\nAnswer in JSON."}
        with pytest.raises(AssertionError, match=error):
            _check(records, "demo item", fake)
