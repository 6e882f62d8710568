"""A request is paid once and replayed as it was answered.

Two items of one job that send the same request (same cache key: same messages, params, sample index) make
one call and both hold its answer; a job that listed the cache before another job stored a key finds that answer
on disk when it claims the key, and does not send it; two processes asking the same requests at once on one
cache folder pay each distinct request once; a rebuild from the cache then gives every item the answer it had.
The fake server answers "first" to the first call of a request and "second" to any later one, so a second call
would be seen in the answers.
"""
from __future__ import annotations

import io
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

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


def test_a_job_that_listed_the_cache_before_another_stored_the_key_does_not_send_it(make_config, server):
    server.set_rules(FIRST_THEN_SECOND)
    cfg = make_config()
    late = Cache(cfg.paths["cache"])
    late.contains("x")  # job B lists the (empty) cache now, before job A stores its answer
    with client(cfg) as llm:
        (first,) = llm.run("judge", "m", [req("a")])
    with client(cfg, late) as llm:  # job B's listing misses the key; its claim reads the disk again and finds it
        (second,) = llm.run("judge", "m", [req("b")])
        assert (llm.acc.calls, llm.acc.cache_hits, llm.acc.cost_usd) == (0, 1, 0.0)
    assert server.request_count() == 1
    assert (first.text, second.text) == ("first", "first") and second.calls[0].cache_hit


def test_an_unclaimed_late_answer_keeps_the_one_stored_first(make_config, server):
    # a writer that stores without a claim (an older checkout, a batch) and a sender race to one key: the cache
    # keeps the first answer stored and the later writer gets that one back
    cfg = make_config()
    cache = Cache(cfg.paths["cache"])
    entry = {"key": "k" * 64, "response": {"text": "first", "finish_reason": "stop",
                                          "usage": {"prompt_tokens": 1, "completion_tokens": 1}}}
    later = {**entry, "response": {**entry["response"], "text": "second"}}
    assert cache.put("k" * 64, entry) is entry
    assert cache.put("k" * 64, later)["response"]["text"] == "first"


ASK = """
import io, json, sys
from aura.config import load_config
from aura.llm import Cache, LLMClient, LLMRequest
from aura.llm.accounting import Accounting
cfg = load_config(sys.argv[1])
reqs = [LLMRequest(item_id=f"i{n}", messages=[{"role": "user", "content": f"question {n}"}], prompt_name="test.v1",
                   prompt_sha256="0" * 64) for n in range(int(sys.argv[2]))]
sys.stdin.readline()  # both processes start sending together
with LLMClient(cfg, Cache(cfg.paths["cache"]), Accounting(label="job", stream=io.StringIO())) as llm:
    results = llm.run("judge", "m", reqs)
    print(json.dumps({"calls": llm.acc.calls, "hits": llm.acc.cache_hits, "texts": [r.text for r in results]}))
"""


def test_two_runs_at_once_on_one_cache_pay_each_distinct_request_once(make_config, server, tmp_path):
    # two processes (two runs, or two jobs of one run) ask the same 16 requests at the same moment, each with
    # its own listing of the empty cache; every answer takes 0.2 s. Before claims, both sent every request.
    server.set_rules([{"match": {}, "delay": 0.2, "content": "answer"}])
    cfg = make_config()
    config_file = tmp_path / "config.json"
    config_file.write_text(json.dumps(cfg.raw), encoding="utf-8")
    procs = [subprocess.Popen([sys.executable, "-c", ASK, str(config_file), "16"], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True) for _ in range(2)]
    for p in procs:
        p.stdin.write("go\n")
        p.stdin.flush()
    out = [json.loads(p.communicate(timeout=120)[0]) for p in procs]
    asked = Counter(json.dumps(r["body"]["messages"]) for r in server.requests() if "body" in r)
    assert len(asked) == 16 and set(asked.values()) == {1}  # 16 distinct requests, each answered once
    assert sum(o["calls"] for o in out) == 16 and sum(o["hits"] for o in out) == 16
    assert all(o["texts"] == ["answer"] * 16 for o in out)
    assert not list(Path(cfg.paths["cache"]).rglob("*.lock"))  # no claim outlives its sender


def test_identical_image_requests_make_one_call(make_config, server):
    cfg = make_config()
    with client(cfg) as llm:
        one, two = llm.generate_images("m", [ImageRequest(item_id=i, prompt="a kitchen", prompt_name="t.v1",
                                                          prompt_sha256="0" * 64) for i in ("a", "b")])
    assert server.request_count() == 1
    assert one.status == two.status == "ok" and one.images == two.images
