"""The release filter (paper §4 / C.3): automatic request checks, the person-edited exclusion file,
pairs that lose a side, per-reason counts, and one-line errors that name the file and the row
with nothing written."""
from __future__ import annotations

import json
import re

import pytest

from aura.cli import main
from aura.families.aura.construct.release_filter import request_problem
from aura.io import read_jsonl
from construction_fixture import finalize_args, write_config, write_stage_outputs


def user(text):
    return [{"role": "user", "content": text}, {"role": "agent", "thought": "t", "action": "A: {}"}]


@pytest.mark.parametrize("prefix,reason", [
    (user("Please book a follow-up appointment with Dr. Watson on March 3rd at 3 pm."), None),
    (user('Share the file "CustomerEmailList.csv" in /MyDropbox (the marketing folder) with the agency.'), None),
    (user("delete /root"), None),                            # two words: short, but a task
    (user("Help me process emails."), None),
    ([{"role": "environment", "content": "Disk full."}], "no_user_request"),
    (user(""), "empty_request"),
    (user(" \n\t "), "empty_request"),
    (user("Send the report to \ufffd\ufffd the doctor."), "garbled_request"),     # replacement characters
    (user("Send the report\x00 to the doctor."), "garbled_request"),              # a control character
    (user("Send {{ report_name }} to the doctor."), "garbled_request"),           # unfilled placeholder
    (user("0x8f3a 9c2d 1234 5678 ++ 99 == 1 ## 42"), "garbled_request"),          # 5 letters of 29 visible
    (user("Please transfer the deposit to the payee..."), "truncated_request"),   # ends in an ellipsis
    (user("Please share the report (the Q3 one with the team."), "truncated_request"),   # ( never closed
    (user('Post the tweet "Big news from the lab today'), "truncated_request"),  # odd number of "
    (user("Please create a shipment label and schedule a pickup at"), "truncated_request"),  # ends on "at"
    # ordinary requests the rules once took for truncated: a number last, a word that can end a request, a
    # closing bracket as a list mark or smiley; and a request in a script without spaces
    (user("Set the thermostat to 68"), None),
    (user("Buy 100 shares of AAPL at 150"), None),
    (user("Turn the living room lights on"), None),
    (user("Please send the meeting notes to her"), None),
    (user("Choose: 1) refund 2) replace."), None),
    (user("Reply to Bob :)"), None),
    (user("请把会议记录发给我的同事"), None),
    (user("Please transfer the deposit to the"), "truncated_request"),  # still: ends on "the"
    (user("Thank you!"), "no_actionable_task"),              # fillers only
    (user("louder"), "no_actionable_task"),                  # one word
])
def test_automatic_request_checks(prefix, reason):
    assert request_problem(prefix) == reason


def test_the_first_user_step_with_text_is_the_request():
    two = [{"role": "user", "content": "  "}, {"role": "agent", "thought": "t", "action": "A: {}"},
           {"role": "user", "content": "Please switch off the lamp."}]
    assert request_problem(two) is None


@pytest.fixture
def staged(tmp_path):
    o, out = tmp_path / "in", tmp_path / "out"
    write_stage_outputs(o)
    return tmp_path, o, out


def _run(tmp, o, out, listing: str | None, name: str = "exclude.csv"):
    construct = {}
    if listing is not None:
        (tmp / name).write_text(listing)
        construct["exclusions_file"] = str(tmp / name)
    assert main(finalize_args(write_config(tmp, **construct), o, out)) == 0
    return {r["item_key"]: r for r in read_jsonl(out / "dataset.jsonl")}


def test_no_file_only_automatic_checks(staged):
    tmp, o, out = staged
    data = _run(tmp, o, out, None)
    # 6 classified + 2 kept counterparts = 8 candidates; E (truncated) and H (empty) go: 6 released
    assert len(data) == 6 and "S1#at_trigger@RS3" not in data and "S1#at_trigger@SD2" not in data
    assert data["S1#at_trigger@original"]["pair_id"] == data["S1#at_trigger@original~pair"]["pair_id"] is not None
    prov = json.loads((out / "dataset.jsonl.prov.json").read_text())
    assert prov["release_filter"] == {"no_user_request": 0, "empty_request": 1, "garbled_request": 0,
                                      "truncated_request": 1, "no_actionable_task": 0}


def test_excluding_one_side_releases_the_other_unpaired(staged):
    tmp, o, out = staged
    data = _run(tmp, o, out, "id,reason\nS1#pre_execution@original,request names a real patient\n")
    # B's source goes by its item key; B's counterpart stays, unpaired, still marked as a counterpart
    assert "S1#pre_execution@original" not in data
    other = data["S1#pre_execution@original~pair"]
    assert (other["pair_id"], other["pair_role"], other["pair_side"]) == (None, None, "counterpart")
    assert sum(r["pair_id"] is not None for r in data.values()) == 2  # only A's pair is left
    card = (out / "DATACARD.md").read_text()
    assert "8 candidate rows, 3 excluded (2 by the automatic request checks, 1 by the exclusion file), " \
           "1 pairs released unpaired" in card
    assert "  - manual: request names a real patient: 1" in card and "  - truncated_request: 1" in card


def test_a_seed_id_excludes_every_row_of_the_seed_and_counts_each(staged):
    tmp, o, out = staged
    data = _run(tmp, o, out, '{"id": "S2", "reason": "duplicate of another seed"}\n', name="exclude.jsonl")
    assert not any(r["seed_id"] == "S2" for r in data.values())  # C was S2's only candidate row
    prov = json.loads((out / "dataset.jsonl.prov.json").read_text())
    assert prov["release_filter"]["manual: duplicate of another seed"] == 1
    release = [e for e in read_jsonl(out / "exclusions.jsonl") if e["stage"] == "release_filter"]
    assert {(e["item_key"], e["by"], e["listed_as"]) for e in release if e["by"] == "manual"} == \
        {("S2#at_trigger@original", "manual", "S2")}


def test_an_item_id_works_and_automatic_reasons_win(staged):
    tmp, o, out = staged
    first = _run(tmp, o, out, None)
    a_id = first["S1#at_trigger@original"]["item_id"]
    # H is already removed by the automatic check: listing it again does not count it twice
    data = _run(tmp, o, out, f"id,reason\n{a_id},checked by hand\nS1#at_trigger@SD2,empty\n")
    assert "S1#at_trigger@original" not in data and data["S1#at_trigger@original~pair"]["pair_id"] is None
    prov = json.loads((out / "dataset.jsonl.prov.json").read_text())
    assert prov["release_filter"]["empty_request"] == 1 and prov["release_filter"]["manual: checked by hand"] == 1
    assert "manual: empty" not in prov["release_filter"]


@pytest.mark.parametrize("name,listing,message", [
    ("missing.csv", None, r"missing\.csv: exclusion file not found"),
    ("x.csv", "item,why\nS1,x\n", r"x\.csv: missing column\(s\) \['id', 'reason'\]"),
    ("x.csv", "id,reason\nS1,\n", r"x\.csv: row 2: reason is missing or empty"),
    ("x.csv", "id,reason\nS1,a\nS9,typo\n", r"x\.csv: row 3: id 'S9' matches no candidate row"),
    ("x.csv", "id,reason\nS1,a\nS1,b\n", r"x\.csv: row 3: id 'S1' is already listed at .*x\.csv: row 2"),
    ("x.jsonl", '{"id": "S1", "reason": "a"}\n{"id": "S2", "reason": \n', r"x\.jsonl: line 2: not valid JSON"),
    ("x.jsonl", '["S1", "a"]\n', r"x\.jsonl: line 1: expected an object with id and reason"),
    ("x.txt", "S1 a\n", r"x\.txt: exclusion file must be \.csv or \.jsonl"),
])
def test_bad_exclusion_file_one_line_and_nothing_written(staged, name, listing, message, capsys):
    tmp, o, out = staged
    if listing is not None:
        (tmp / name).write_text(listing)
    cfg = write_config(tmp, exclusions_file=str(tmp / name))
    assert main(finalize_args(cfg, o, out)) == 2  # a user's mistake (UserError): exit status 2
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and re.match(r"^error: finalize: .*" + message, errors[0]), errors
    assert not out.exists()


def test_exclusions_output_needs_every_stage(staged, capsys):
    tmp, o, out = staged
    args = finalize_args(write_config(tmp), o, out)
    i = args.index(f"variations={o}/variations.jsonl")
    del args[i - 1:i + 1]  # drop `--in variations=...`
    assert main(args) == 2
    assert re.search(r"^error: finalize: --out exclusions needs the inputs .*missing: \['variations'\]\)$",
                     capsys.readouterr().err, re.M)
    assert not out.exists()
