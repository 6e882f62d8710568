"""A request is paid once and replayed as it was answered.

Two items of one job that send the same request (same cache key: same messages, params, sample index) make
one call and both hold its answer; two jobs that both miss the same key (each listed the cache before the
other stored it) both end with the answer stored first, and the cache keeps that one; a rebuild from the
cache then gives every item the answer it had. The fake server answers "first" to the first call of a
request and "second" to any later one, so a second call would be seen in the answers.
"""
from __future__ import annotations

import io

from aura.llm import Cache, LLMClient, LLMRequest
from aura.llm.accounting import Accounting
from aura.llm.images import ImageRequest

FIRST_THEN_SECOND = [{"match": {}, "times": 1, "content": "first", "delay": 0.05}, {"match": {}, "content": "second"}]


def req(item: str, text: str = "Is this safe?") -> LLMRequest:
    return LLMRequest(item_id=item, messages=[{"role": "user", "content": text}], prompt_name="test.v1",
                      prompt_sha256="0" * 64)


def client(cfg, cache: Cache | None = None) -> LLMClient:
    return LLMClient(cfg, cache or Cache(cfg.paths["cache"]), Accounting(label="test", stream=io.StringIO()))


def test_two_items_with_one_request_make_one_call_and_share_its_answer(make_config, server):
    server.set_rules([{"match": {"contains": "Another question"}, "content": "other"}, *FIRST_THEN_SECOND])
    cfg = make_config()
    with client(cfg) as llm:
        a, b, c = llm.run("judge", "m", [req("a"), req("b"), req("c", "Another question")])
        calls, hits = llm.acc.calls, llm.acc.cache_hits
    # "a" and "b" are one request: one call ("first"; a second call of it would be answered "second"); "c" is its
    # own call ("other")
    assert server.request_count() == 2 and (calls, hits) == (2, 1)
    assert (a.text, b.text, c.text) == ("first", "first", "other")
    assert sum(r.calls[0].cache_hit for r in (a, b)) == 1  # the one that waited counts as a cache hit
    # a rebuild from the cache: 0 calls, the same answers
    with client(cfg) as llm:
        again = llm.run("judge", "m", [req("a"), req("b"), req("c", "Another question")])
        assert llm.acc.calls == 0
    assert [r.text for r in again] == ["first", "first", "other"]
    assert server.request_count() == 2


def test_a_failed_call_fails_the_identical_request_waiting_on_it_unsent(make_config, server):
    # the call gets a 400 on an item-level error (the prompt is too long): its item fails, and the identical
    # request that waited on it fails with the same reason instead of paying for the same refusal again
    server.set_rules([{"match": {}, "status": 400, "delay": 0.05, "code": "context_length_exceeded",
                       "message": "This model's maximum context length is 8 tokens"}])
    cfg = make_config({"llm": {"max_failed_items": 2}})  # two failed items stay under the job's ceiling
    with client(cfg) as llm:
        a, b = llm.run("judge", "m", [req("a"), req("b")])
        failed = llm.acc.outcomes["failed"]
    assert server.request_count() == 1 and (a.status, b.status, failed) == ("failed", "failed", 2)
    sent, waited = (a, b) if "identical request" in b.error else (b, a)
    assert "maximum context length" in sent.error
    assert waited.error == f"its identical request ({sent.item_id}) failed: {sent.error}"


def test_two_jobs_missing_one_key_both_keep_the_answer_stored_first(make_config, server):
    server.set_rules(FIRST_THEN_SECOND)
    cfg = make_config()
    late = Cache(cfg.paths["cache"])
    late.contains("x")  # job B lists the (empty) cache now, before job A stores its answer
    with client(cfg) as llm:
        (first,) = llm.run("judge", "m", [req("a")])
    with client(cfg, late) as llm:  # job B misses the key (its listing is older), calls, and is answered "second"
        (second,) = llm.run("judge", "m", [req("b")])
        assert llm.acc.calls == 1  # it paid for its call ...
    assert server.request_count() == 2
    assert (first.text, second.text) == ("first", "first")  # ... but uses the answer stored first, as the cache does
    with client(cfg) as llm:
        (rebuilt,) = llm.run("judge", "m", [req("b")])
    assert rebuilt.text == "first" and rebuilt.calls[0].cache_hit


def test_identical_image_requests_make_one_call(make_config, server):
    cfg = make_config()
    with client(cfg) as llm:
        one, two = llm.generate_images("m", [ImageRequest(item_id=i, prompt="a kitchen", prompt_name="t.v1",
                                                          prompt_sha256="0" * 64) for i in ("a", "b")])
    assert server.request_count() == 1
    assert one.status == two.status == "ok" and one.images == two.images
