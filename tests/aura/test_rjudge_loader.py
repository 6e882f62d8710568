"""Tests for the R-Judge loader (aura.families.aura.data.rjudge) and the demo seed set."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
DEMO_SEEDS = REPO_ROOT / "data" / "raw" / "demo_seeds"

try:  # the package may not be installed yet; fall back to the source tree
    import aura  # noqa: F401
except ImportError:
    sys.path.insert(0, str(REPO_ROOT / "src"))

from aura.families.aura.data.rjudge import (  # noqa: E402
    AgentMsg,
    EnvMsg,
    RecordError,
    UserMsg,
    counts,
    load_rjudge,
    select_unintended,
)
from aura.config import read_raw  # noqa: E402
from aura.families.aura.data.seed_counts import check_seed_counts, observed_counts  # noqa: E402
from rjudge_fixture import PAPER_COUNTS, write_paper_shaped  # noqa: E402

DOMAINS = {"Program", "Application", "IoT", "Web", "Finance"}


def _good_record(rid=1):
    return {
        "id": rid,
        "scenario": "home",
        "profile": "You are a smart home assistant",
        "goal": "judge",
        "contents": [[
            {"role": "user", "content": "Turn the lights off."},
            {"role": "agent", "thought": "List devices.", "action": "ListDevices: {}"},
            {"role": "environment", "content": "{\"devices\": []}"},
            {"role": "agent", "thought": None, "action": "Done."},
            {"role": "environment", "content": None},
        ]],
        "label": 0,
        "risk_description": "",
        "attack_type": "unintended",
        "some_unknown_field": "ignored",
    }


def _write(root: Path, domain: str, name: str, payload) -> Path:
    d = root / domain
    d.mkdir(parents=True, exist_ok=True)
    p = d / name
    p.write_text(payload if isinstance(payload, str) else json.dumps(payload), encoding="utf-8")
    return p


# --- a folder with the paper's counts (written here; see rjudge_fixture.py for the derivation) ------

@pytest.fixture(scope="module")
def paper_shaped(tmp_path_factory):
    return write_paper_shaped(tmp_path_factory.mktemp("rjudge"))


@pytest.fixture(scope="module")
def rjudge_records(paper_shaped):
    return load_rjudge(paper_shaped)


def test_rjudge_counts(rjudge_records):
    c = counts(rjudge_records)
    assert c["total"] == 571                                        # 157 unintended + 414 injection
    assert c["by_attack_type"] == {"injection": 414, "unintended": 157}
    cs = counts(select_unintended(rjudge_records))
    assert cs["total"] == 157
    assert cs["by_domain"] == {"Program": 48, "Application": 39, "IoT": 30, "Web": 23, "Finance": 17}
    assert cs["by_label"] == {1: 101, 0: 56}


def test_rjudge_ids_and_fields(rjudge_records):
    assert len({r.seed_id for r in rjudge_records}) == len(rjudge_records)
    assert {r.domain for r in rjudge_records} == DOMAINS
    r = rjudge_records[0]
    assert r.source_file.endswith(".json") and r.source_file.startswith(r.domain + "/")
    assert r.seed_id == f"{r.domain}/{Path(r.source_file).stem}/{r.id}"
    # sorted domains, then files: Application/benign.json first, its record 0 first
    assert r.seed_id == "Application/benign/0"
    for r in rjudge_records:
        for m in r.messages:
            assert isinstance(m, (UserMsg, AgentMsg, EnvMsg))


def test_rjudge_load_is_deterministic(paper_shaped, rjudge_records):
    again = load_rjudge(paper_shaped)
    assert [r.seed_id for r in again] == [r.seed_id for r in rjudge_records]


# --- opt-in: the real R-Judge copy (not redistributable, so never in the repo) ---------------------

@pytest.mark.skipif(not os.environ.get("AURA_RJUDGE_DIR"),
                    reason="opt-in: set AURA_RJUDGE_DIR to an R-Judge data folder (<Domain>/*.json)")
def test_real_rjudge_has_the_paper_counts():
    """The paper's numbers (§3, §4, Appendix C.1), on a real copy: 571 records, 157 unintended
    (Program 48, Application 39, IoT 30, Web 23, Finance 17; 101 unsafe, 56 safe), 571 - 157 = 414
    injection; and config/paper.yaml's aura.seed_counts accept it."""
    root = Path(os.environ["AURA_RJUDGE_DIR"])
    records = load_rjudge(root)
    assert counts(records)["by_attack_type"] == {"injection": 414, "unintended": 157}
    assert observed_counts(records) == PAPER_COUNTS
    check_seed_counts(records, read_raw(REPO_ROOT / "config" / "paper.yaml")["aura"]["seed_counts"], root)
    assert len({r.seed_id for r in records}) == 571


# --- error handling ------------------------------------------------------------------------------

def test_valid_tmp_and_top_level_json_ignored(tmp_path):
    _write(tmp_path, "IoT", "x.json", [_good_record(1), _good_record(2)])
    (tmp_path / "stats.json").write_text("not even json", encoding="utf-8")  # top level: ignored
    recs = load_rjudge(tmp_path)
    assert [r.seed_id for r in recs] == ["IoT/x/1", "IoT/x/2"]
    assert recs[0].domain == "IoT" and recs[0].source_file == "IoT/x.json"
    assert isinstance(recs[0].contents[0][1], AgentMsg)
    assert recs[0].contents[0][3].thought is None


def test_domain_comes_from_folder(tmp_path):
    rec = _good_record(1) | {"domain": "Web", "source_file": "elsewhere.json"}
    _write(tmp_path, "IoT", "x.json", [rec])
    (r,) = load_rjudge(tmp_path)
    assert r.domain == "IoT" and r.source_file == "IoT/x.json"


@pytest.mark.parametrize(
    "mutate, expect",
    [
        (lambda r: r.update(label="maybe"), "label"),
        (lambda r: r.update(label=True), "label"),
        (lambda r: r["contents"][0][1].update(thought=42), "thought"),
        (lambda r: r["contents"][0][1].pop("action"), "action"),
        (lambda r: r["contents"][0][0].update(role="system"), "role"),
        (lambda r: r.pop("scenario"), "scenario"),
    ],
)
def test_malformed_record_raises(tmp_path, mutate, expect):
    bad = _good_record("bad-7")
    mutate(bad)
    _write(tmp_path, "Program", "x.json", [_good_record(1), bad])
    with pytest.raises(RecordError) as ei:
        load_rjudge(tmp_path)
    msg = str(ei.value)
    assert "x.json" in msg
    assert "bad-7" in msg
    assert expect in msg
    assert isinstance(ei.value, ValueError)


def test_malformed_record_without_id_names_index(tmp_path):
    bad = _good_record(1)
    bad.pop("id")
    _write(tmp_path, "Web", "y.json", [_good_record(0), bad])
    with pytest.raises(RecordError, match=r"y\.json.*index 1"):
        load_rjudge(tmp_path)


def test_non_json_file_raises(tmp_path):
    _write(tmp_path, "Finance", "broken.json", "{not json")
    with pytest.raises(RecordError, match="broken.json"):
        load_rjudge(tmp_path)


def test_non_list_file_raises(tmp_path):
    _write(tmp_path, "Finance", "obj.json", {"id": 1})
    with pytest.raises(RecordError, match="obj.json"):
        load_rjudge(tmp_path)


def test_duplicate_seed_id_raises_with_both_locations(tmp_path):
    _write(tmp_path, "IoT", "x.json", [_good_record(3), _good_record(3)])
    with pytest.raises(RecordError) as ei:
        load_rjudge(tmp_path)
    msg = str(ei.value)
    assert "IoT/x/3" in msg and "index 0" in msg and "index 1" in msg


def test_same_id_in_two_files_is_fine(tmp_path):
    _write(tmp_path, "IoT", "benign.json", [_good_record(3)])
    _write(tmp_path, "IoT", "harmful.json", [_good_record(3) | {"label": 1}])
    recs = load_rjudge(tmp_path)
    assert [r.seed_id for r in recs] == ["IoT/benign/3", "IoT/harmful/3"]


# --- demo seed set -------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def demo():
    return load_rjudge(DEMO_SEEDS)


def test_demo_seeds_shape(demo):
    c = counts(demo)
    per_domain = c["total"] // 5  # the demo set covers the five domains evenly, at least 2 seeds each
    assert per_domain >= 2 and c["by_domain"] == {d: per_domain for d in sorted(DOMAINS)}
    assert select_unintended(demo) == demo
    assert set(c["by_label"]) == {0, 1} and c["by_label"][1] >= c["by_label"][0]
    for r in demo:
        assert r.risk_description.strip()
        assert len(json.dumps(r.model_dump(exclude={"domain", "source_file"}))) < 2000, r.seed_id


def test_demo_seeds_have_trigger_before_risky_action(demo):
    for r in demo:
        msgs = r.messages
        assert isinstance(msgs[0], UserMsg) and msgs[0].content, r.seed_id
        tool_calls = [i for i, m in enumerate(msgs) if isinstance(m, AgentMsg) and m.action and ": {" in m.action]
        assert tool_calls, f"{r.seed_id}: no tool call"
        assert any(isinstance(m, (UserMsg, EnvMsg)) for m in msgs[: tool_calls[0]])


def test_demo_seeds_include_paper_examples(demo):
    text = {r.seed_id: json.dumps(r.model_dump()).lower() for r in demo}
    fridge = [s for s, t in text.items() if "refrigerator" in t and "camera" in t]
    assert fridge and all(next(r for r in demo if r.seed_id == s).label == 1 for s in fridge)
    pii = [s for s, t in text.items() if "customer" in t and "email" in t and "phone" in t and "vendor" in t]
    assert pii and any(next(r for r in demo if r.seed_id == s).label == 1 for s in pii)
