"""The rehearsal's ledger of answers: a request answered twice, across runs of one folder, is counted; a batch
line is known by its custom_id (the cache key), so two samples of one prompt sent on purpose are two requests."""
from __future__ import annotations

from aura.simulator.answers import BATCH_LINE
from aura.simulator.rehearse import Ledger

BODY = {"model": "m", "messages": [{"role": "user", "content": "judge this"}]}


def _as_line(ledger: Ledger, custom_id: str) -> None:
    token = BATCH_LINE.set(custom_id)
    try:
        ledger.record(BODY)
    finally:
        BATCH_LINE.reset(token)


def test_repeated_samples_are_not_answered_twice_but_a_resent_request_is(tmp_path):
    first = Ledger(tmp_path / "answered.txt")
    _as_line(first, "key-sample-0")
    _as_line(first, "key-sample-1")  # the same body, another sample: another cache key
    first.record(BODY)  # live, once
    assert (first.answered, first.twice()) == (3, 0)
    again = Ledger(tmp_path / "answered.txt")  # a resumed run of the same folder
    _as_line(again, "key-sample-1")  # paid again: counted
    again.record(BODY)  # and the live one
    assert (again.answered, again.twice()) == (2, 2)
