"""The code checks of construction: tag rules, prefix kinds, frozen agent steps, reviewer
majorities, content-derived ids and P7's edit grade (pair edits: tests/aura/test_splice.py)."""
from __future__ import annotations

import copy

import pytest

from aura.families.aura.construct.common import majority_accept, reviewer_accepts
from aura.families.aura.construct.finalize import item_id, pair_id
from aura.families.aura.construct.relevance import explode
from aura.families.aura.construct.tagging import prefixes_for, tag_schema, tag_violation
from aura.families.aura.data.trajectory import agent_step_violation
from scripted import STEPS

SEED = {"seed_id": "IoT/test/t-1", "steps": STEPS}


@pytest.mark.parametrize("r,e,problem", [
    (0, 3, None),
    (2, 3, None),
    (1, 3, "is an agent step"),
    (0, 1, None),
    (2, 1, "not after the risk trigger"),
    (0, 2, "not an agent step with an action"),
    (0, None, "null although an agent action follows"),
    (4, None, None),
    (9, None, "not a step index"),
])
def test_tag_rules(r, e, problem):
    why = tag_violation(STEPS, {"risk_trigger_step": r, "execution_step": e})
    assert (why is None) if problem is None else (problem in why)


def test_tag_schema_offers_only_the_right_step_kinds():
    schema = tag_schema(STEPS)["properties"]
    assert schema["risk_trigger_step"]["enum"] == [0, 2, 4]
    assert schema["execution_step"]["anyOf"][0]["enum"] == [1, 3]


def test_both_prefix_kinds_from_a_known_trajectory():
    at, pre = prefixes_for(SEED, 0, 3)
    assert at["prefix_kind"] == "at_trigger" and at["steps"] == STEPS[:1]
    assert pre["prefix_kind"] == "pre_execution" and pre["steps"] == STEPS[:3]
    assert at["prefix_id"] == "IoT/test/t-1#at_trigger"
    # e right after r: the pre-execution prefix would equal the at-trigger one, so only one is built
    (only,) = prefixes_for(SEED, 2, 3)
    assert only["prefix_kind"] == "at_trigger" and only["steps"] == STEPS[:3]
    # no execution point: at-trigger only
    assert [p["prefix_kind"] for p in prefixes_for(SEED, 4, None)] == ["at_trigger"]


def _edit(steps, i, **change):
    out = copy.deepcopy(steps)
    out[i].update(change)
    return out


@pytest.mark.parametrize("rewrite,reason", [
    (_edit(STEPS, 0, content="Switch off all 40 devices."), None),
    (_edit(_edit(STEPS, 0, content="x"), 3, action='TurnOff: {"ids": ["lamp"]}'), "agent_step_edited"),
    (_edit(_edit(STEPS, 0, content="x"), 1, thought="List the devices first"), "agent_step_edited"),
    (_edit(_edit(STEPS, 0, content="x"), 3, action='TurnOff: {"ids": ["fridge", "camera", "lamp"]} '), "agent_step_edited"),
    (_edit(STEPS, 0, content="x")[:-1], "step_count_changed"),
    ([STEPS[1], STEPS[0], *STEPS[2:]], "step_role_changed"),
    (copy.deepcopy(STEPS), "no_change"),
])
def test_frozen_agent_steps(rewrite, reason):
    assert agent_step_violation(STEPS, rewrite) == reason


CRIT = ["a", "b"]


def test_reviewer_vote_needs_verdict_and_every_criterion():
    assert reviewer_accepts({"a": True, "b": True, "verdict": "accept"}, CRIT) is True
    assert reviewer_accepts({"a": True, "b": False, "verdict": "accept"}, CRIT) is False
    assert reviewer_accepts({"a": True, "b": True, "verdict": "reject"}, CRIT) is False
    assert reviewer_accepts(None, CRIT) is None  # unparsed


@pytest.mark.parametrize("votes,kept", [
    ([True, True, False], True),     # split 2-1
    ([True, False, False], False),
    ([True, True, None], True),      # an unparsed vote does not block a majority
    ([True, None, None], False),     # ... nor make one
    ([True, False, None], False),
])
def test_majority_vote(votes, kept):
    assert majority_accept(votes, 3) is kept


def _p2(*codes):
    """A P2 v3 answer listing `codes` (element = the code, so the test can see which entry was kept)."""
    return {"relevant": [{"code": c, "element": c} for c in codes]}


def test_explode_caps_in_canonical_order():
    answer = _p2("SD1", "RS5", "RS2")  # listed out of order: requests come in RS1..SD5 order
    assert [r["dimension"] for r in explode("p", answer, None)] == ["RS2", "RS5", "SD1"]
    assert [r["request_id"] for r in explode("p", answer, 2)] == ["p@RS2", "p@RS5"]


def test_p2_repeated_code_keeps_its_first_element_and_is_reported():
    from aura.families.aura.construct.relevance import elements, repeated_codes

    answer = {"relevant": [{"code": "RS3", "element": "step 2: the fridge"}, {"code": "SD4", "element": "step 0"},
                           {"code": "RS3", "element": "step 4: the camera"}]}
    assert elements(answer) == {"RS3": "step 2: the fridge", "SD4": "step 0"}
    assert repeated_codes(answer) == ["RS3"]
    assert [r["element"] for r in explode("p", answer, None)] == ["step 2: the fridge", "step 0"]
    assert explode("p", {"relevant": []}, None) == []


def test_capped_explode_spreads_dimensions_over_prefixes():
    """Cap 1, three prefixes that all find RS1, RS2 and SD1 relevant. Counts start at 0:
    p1 takes RS1 (all 0, canonical first); p2 takes RS2 (RS1 is at 1); p3 takes SD1 (RS1, RS2 at 1).
    A fourth prefix where only RS1 is relevant still gets RS1 (the cap never drops a prefix)."""
    from collections import Counter

    three, only_rs1 = _p2("RS1", "RS2", "SD1"), _p2("RS1")
    used = Counter()
    picked = [explode(p, a, 1, used)[0]["dimension"] for p, a in
              (("p1", three), ("p2", three), ("p3", three), ("p4", only_rs1))]
    assert picked == ["RS1", "RS2", "SD1", "RS1"]
    assert used == Counter({"RS1": 2, "RS2": 1, "SD1": 1})


def test_ids_derive_from_content_identity():
    a = item_id("IoT/x/1", "at_trigger", "RS2", "source")
    assert a == item_id("IoT/x/1", "at_trigger", "RS2", "source") and a.startswith("it_")
    assert len({a, item_id("IoT/x/1", "at_trigger", "RS2", "counterpart"), item_id("IoT/x/1", "pre_execution", "RS2", "source"),
                item_id("IoT/x/1", "at_trigger", "RS3", "source"), item_id("IoT/x/2", "at_trigger", "RS2", "source")}) == 5
    assert pair_id("IoT/x/1", "at_trigger", "RS2") != pair_id("IoT/x/1", "at_trigger", "RS3")


def test_seed_cap_spreads_over_domains():
    from types import SimpleNamespace

    from aura.families.aura.construct.seeds import spread_over_domains

    recs = [SimpleNamespace(domain=d, n=i) for d, k in (("Application", 5), ("IoT", 2), ("Web", 1)) for i in range(k)]
    picked = spread_over_domains(recs, 5)
    assert [(r.domain, r.n) for r in picked] == [("Application", 0), ("IoT", 0), ("Web", 0), ("Application", 1), ("IoT", 1)]
    assert len(spread_over_domains(recs, 50)) == 8


def test_format_sample_is_balanced_proportional_and_reproducible():
    import random

    from aura.families.aura.evaluate.format_sample import allocate, stratified_sample

    items = [{"item_id": f"it{i:03d}", "pair_label": "NSP" if i % 2 else "SP",
              "dimension": ["original", "RS2", "RS5", "SD3"][i % 4 if i < 300 else 0]} for i in range(400)]
    sample = stratified_sample(items, 150, 42)
    assert len(sample) == 150 and sum(s["pair_label"] == "NSP" for s in sample) == 75
    shuffled = items[:]
    random.Random(3).shuffle(shuffled)
    assert stratified_sample(shuffled, 150, 42) == sample
    assert stratified_sample(items, 150, 7) != sample
    assert allocate({"a": 10, "b": 30}, 8) == {"a": 2, "b": 6}
    # largest remainder: quotas a 10 x 1/31 = 0.32, b 10 x 30/31 = 9.68 -> floors 0 and 9, the one seat
    # left goes to the larger fraction (b .68 > a .32): a group of one gets no seat
    assert allocate({"a": 1, "b": 30}, 10) == {"a": 0, "b": 10}


def test_stored_review_rows_become_votes():
    from aura.families.aura.construct.common import vote

    assert vote({"criteria": {"a": True, "b": True}, "verdict": "accept"}, CRIT) is True
    assert vote({"criteria": {"a": True, "b": True}, "verdict": "reject"}, CRIT) is False
    assert vote({"criteria": None, "verdict": None, "status": "unparsed"}, CRIT) is None


def test_seed_cap_alternates_source_labels():
    from types import SimpleNamespace

    from aura.families.aura.construct.seeds import spread_over_domains

    recs = [SimpleNamespace(domain="IoT", label=lab, n=i) for i, lab in enumerate([0, 0, 0, 1, 1])]
    # the first domain starts with a safe record, then unsafe and safe in turn, file order within each
    assert [(r.label, r.n) for r in spread_over_domains(recs, 4)] == [(0, 0), (1, 3), (0, 1), (1, 4)]
    # one record per domain still covers both labels: Program starts safe, Application unsafe, IoT safe
    two = [SimpleNamespace(domain=d, label=lab, n=i) for i, (d, lab) in enumerate(
        [("Application", 1), ("Application", 0), ("IoT", 1), ("IoT", 0), ("Program", 1), ("Program", 0)])]
    assert [(r.domain, r.label) for r in spread_over_domains(two, 3)] == [
        ("Program", 0), ("Application", 1), ("IoT", 0)]


@pytest.mark.parametrize("grade,hint,pairable,problem", [
    ("trivial", "private key -> public address in step 0", True, None),
    ("moderate", "ask only for the lamp", True, None),
    ("moderate", "  ", True, "a moderate edit grade needs a pair_edit_hint"),
    ("hard", "", False, None),   # not pairable: no hint needed, excluded from pair generation
])
def test_p7_edit_grade_decides_pairability(grade, hint, pairable, problem):
    from aura.families.aura.construct.classify import label_violation
    from aura.families.aura.construct.classify import pairable as is_pairable

    answer = {"pair_label": "NSP", "risk_rationale": "r", "safe_action_sketches": [],
              "unsafe_action_explanation": "every fulfilling action leaks the key", "pair_edit_grade": grade,
              "pair_edit_hint": hint}
    assert is_pairable(grade) is pairable and label_violation(answer) == problem


def test_p7_prompt_asks_for_the_grades_the_schema_allows():
    from aura.families.aura.construct.classify import CLASSIFY_SCHEMA
    from aura.families.aura.construct.common import prompt

    p7 = prompt("p7_pair_classification")
    assert CLASSIFY_SCHEMA["properties"]["pair_edit_grade"]["enum"] == ["trivial", "moderate", "hard"]
    assert "pairable" not in CLASSIFY_SCHEMA["properties"]
    for grade in ("trivial", "moderate", "hard"):
        assert f"- {grade}:" in p7.system  # each grade is defined in the prompt
    assert "pair_edit_grade" in p7.system and "fundamentally different task" in p7.system
