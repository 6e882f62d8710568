"""The construction funnel on hand-written stage outputs (tests/construction_fixture.py) with one
rejection at every stage: each count derived by hand, the stage of each row, the paper's figures
compared like with like, and the funnel rebuilt from exclusions.jsonl + the released dataset alone."""
from __future__ import annotations

import re

import pandas as pd
import pytest

from aura.cli import main
from aura.families.aura.construct.counts import FUNNEL, funnel_from_exclusions
from aura.io import read_jsonl, write_jsonl
from construction_fixture import counts_args, finalize_args, write_config, write_stage_outputs

# Hand derivation (fixture docstring):
# seeds 3 (S1, S2, S3); S3's tag is rejected -> 2 tagged; prefixes S1 at/pre + S2 at/pre = 4 (2 + 2).
# relevance: S2 at failed -> 1 prefix without an answer; requests 5 (S1 at) + 1 (S1 pre) = 6, RS1 1, other 5.
# variations 6: SD1 unparsed -> 5 parseable; RS2 at edited an agent step -> 4 pass; S1 pre RS2 has
#   1 accept of 3 -> 3 kept (RS1, RS3, SD2).
# pool 4 originals + 3 variations = 7; S2 pre original failed -> 6 classified; SD2 is "hard" -> 1 not
#   pairable; candidates 6 - 1 = 5 (A, B, C, D, E).
# pairs: E unparsed -> 4 parseable; C truncated_length_changed -> 3 pass; D 1 accept of 3 -> 2 kept (A, B),
#   4 candidate paired rows.
# release filter: 6 sources + 2 counterparts = 8 rows; E's request ends in "and" (truncated_request),
#   H's is whitespace (empty_request): 2 automatic; the file removes A's counterpart: 1 manual.
# released 8 - 3 = 5 rows: A (unpaired now), B + B's counterpart (1 pair, 2 paired rows), C, D
#   -> 3 unpaired; pairs losing a side 2 kept - 1 released = 1.
EXPECTED = {
    "seeds selected": 3, "seeds rejected at tagging": 1, "seeds tagged": 2, "prefixes": 4, "prefixes at-trigger": 2,
    "prefixes pre-execution": 2, "prefixes without a relevance answer": 1, "variation requests": 6,
    "variation requests RS1": 1, "variation requests RS2-RS6, SD1-SD5": 5, "variations failed or unparseable": 1,
    "variations parseable": 5, "variations rejected by agent-step check": 1, "variations passing agent-step check": 4,
    "variations rejected by review": 1, "variations kept by review": 3, "merged pool": 7, "merged pool originals": 4,
    "merged pool variations": 3, "items rejected at classification": 1, "items classified": 6,
    "items not pairable (edit grade hard)": 1, "pair candidates": 5, "pair candidates failed or unparseable": 1,
    "pair candidates parseable": 4, "pair candidates rejected by code checks": 1,
    "pair candidates passing code checks": 3, "pair candidates rejected by review": 1, "pairs kept by review": 2,
    "candidate paired rows": 4, "rows before release filter": 8, "rows excluded by automatic checks": 2,
    "rows excluded: no_user_request": 0, "rows excluded: empty_request": 1, "rows excluded: garbled_request": 0,
    "rows excluded: truncated_request": 1, "rows excluded: no_actionable_task": 0,
    "rows excluded by exclusion file": 1, "pairs losing a side": 1, "released rows": 5, "released pairs": 1,
    "released paired rows": 2, "released unpaired rows": 3,
}


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("funnel")
    o, out = tmp / "in", tmp / "out"
    write_stage_outputs(o)
    (tmp / "exclude.csv").write_text("id,reason\nS1#at_trigger@original~pair,names a real person\n")
    cfg = write_config(tmp, exclusions_file=str(tmp / "exclude.csv"))
    assert main(finalize_args(cfg, o, out)) == 0
    assert main(counts_args(cfg, o, out)) == 0
    return tmp, o, out, cfg


def test_funnel_counts_by_hand(run):
    _, _, out, _ = run
    table = pd.read_csv(out / "funnel.csv")
    assert list(table.columns) == ["stage", "count", "ours", "paper"]
    assert dict(zip(table["count"], table["ours"])) == EXPECTED


def test_every_row_names_its_stage_and_compares_like_with_like(run):
    _, _, out, _ = run
    table = pd.read_csv(out / "funnel.csv").set_index("count")
    assert list(dict.fromkeys(table["stage"])) == ["selection", "tagging", "relevance", "generation", "review",
                                                   "classification", "pair generation", "pair review",
                                                   "release filter", "release"]
    # the paper's pre-filter pair figures sit beside our pre-filter counts, its released ones beside the dataset
    paper = table["paper"].dropna().astype(int).to_dict()
    assert {k: paper[k] for k in ("pair candidates", "pair candidates parseable", "pairs kept by review",
                                  "candidate paired rows")} == {"pair candidates": 593, "pair candidates parseable": 590,
                                                                "pairs kept by review": 428, "candidate paired rows": 856}
    assert table.loc["pairs kept by review", "stage"] == "pair review"
    assert {k: paper[k] for k in ("released rows", "released pairs", "released paired rows", "released unpaired rows")} \
        == {"released rows": 1249, "released pairs": 408, "released paired rows": 816, "released unpaired rows": 433}
    # the paper states nothing about its release-filter rows: no invented reference figure
    assert table.loc[table["stage"] == "release filter", "paper"].isna().all()


def test_funnel_rebuilt_from_exclusions_and_dataset_alone(run):
    _, _, out, _ = run
    rebuilt = funnel_from_exclusions(list(read_jsonl(out / "exclusions.jsonl")), list(read_jsonl(out / "dataset.jsonl")))
    table = pd.read_csv(out / "funnel.csv")
    assert rebuilt == dict(zip(table["count"], table["ours"])) == EXPECTED
    assert [c for _, c, _ in FUNNEL] == list(table["count"])


def test_exclusions_list_every_stage(run):
    _, _, out, _ = run
    got = sorted((e["stage"], e["id"], e["reason"]) for e in read_jsonl(out / "exclusions.jsonl"))
    assert got == sorted([
        ("tagging", "S3", "rejected: risk_trigger_step 1 is an agent step"),
        ("relevance", "S2#at_trigger", "failed: HTTP 500"),
        ("generation", "S1#at_trigger@SD1", "unparsed: no JSON object"),
        ("variation_check", "S1#at_trigger@RS2", "agent_step_edited"),
        ("review", "S1#pre_execution@RS2", "majority reject (1 of 3 votes accept)"),
        ("classification", "S2#pre_execution@original", "failed: HTTP 500"),
        ("pairability", "S1#at_trigger@SD2", "edit grade hard"),
        ("pair_generation", "S1#at_trigger@RS3~pair", "unparsed: no JSON object"),
        ("pair_check", "S2#at_trigger@original~pair", "truncated_length_changed"),
        ("pair_review", "S1#at_trigger@RS1~pair", "majority reject (1 of 3 votes accept)"),
        *[("release_filter", e["id"], e["reason"]) for e in read_jsonl(out / "exclusions.jsonl")
          if e["stage"] == "release_filter"],
    ])
    release = {e["item_key"]: (e["by"], e["reason"], e["side"]) for e in read_jsonl(out / "exclusions.jsonl")
               if e["stage"] == "release_filter"}
    assert release == {"S1#at_trigger@RS3": ("automatic", "truncated_request", "source"),
                       "S1#at_trigger@SD2": ("automatic", "empty_request", "source"),
                       "S1#at_trigger@original~pair": ("manual", "names a real person", "counterpart")}


def test_stage_stops_when_exclusions_miss_a_rejection(run, tmp_path, capsys):
    """A rejection missing from exclusions.jsonl makes the two funnels disagree: one clear line, no table."""
    tmp, o, out, cfg = run
    rows = [e for e in read_jsonl(out / "exclusions.jsonl") if e["stage"] != "review"]
    write_jsonl(tmp_path / "exclusions.jsonl", rows)
    (tmp_path / "dataset.jsonl").write_text((out / "dataset.jsonl").read_text())
    args = counts_args(cfg, o, tmp_path)
    assert main(args) == 2  # a user's mistake (UserError): one line, exit status 2
    assert re.search(r"^error: construction-counts: .*does not account for every rejection .*variations rejected by "
                     r"review: 1 from the stage files, 0 from exclusions.jsonl", capsys.readouterr().err, re.M)
    assert not (tmp_path / "funnel.csv").exists()
