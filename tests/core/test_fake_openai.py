"""Tests for the fake OpenAI-compatible server, driven by the real openai client."""

from __future__ import annotations

import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import openai
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from aura.simulator.server import FakeOpenAIServer, schema_default  # noqa: E402

MSGS = [{"role": "user", "content": "hello there"}]


@pytest.fixture(scope="module")
def server():
    with FakeOpenAIServer() as srv:
        yield srv


@pytest.fixture(autouse=True)
def _reset(server):
    server.reset()
    yield


@pytest.fixture
def client(server):
    c = openai.OpenAI(base_url=server.base_url, api_key="test-key", max_retries=0, timeout=5)
    yield c
    c.close()


def _ask(client, **kw):
    kw.setdefault("model", "m")
    kw.setdefault("messages", MSGS)
    return client.chat.completions.create(**kw)


def test_default_ok_and_request_log(server, client):
    resp = _ask(client)
    assert resp.choices[0].message.content == "ok"
    assert resp.choices[0].finish_reason == "stop"
    assert resp.model == "m"
    # prompt: len("hello there") // 4 = 11 // 4 = 2; completion: max(1, len("ok") // 4) = 1
    assert (resp.usage.prompt_tokens, resp.usage.completion_tokens, resp.usage.total_tokens) == (2, 1, 3)
    reqs = server.requests()
    assert len(reqs) == 1
    assert reqs[0]["path"] == "/v1/chat/completions"
    assert reqs[0]["body"]["messages"] == MSGS
    assert reqs[0]["headers"]["authorization"] == "Bearer test-key"
    assert [m.id for m in client.models.list()] == ["fake-model"]


def test_json_rule_with_match(server, client):
    server.set_rules([
        {"match": {"contains": "nothing-like-this"}, "content": "wrong"},
        {"match": {"model": "m", "contains": "hello"}, "json": {"label": "yes", "n": 3}},
    ])
    resp = _ask(client)
    assert json.loads(resp.choices[0].message.content) == {"label": "yes", "n": 3}
    assert _ask(client, model="other").choices[0].message.content == "ok"


def test_times_limited_429_then_success(server, client):
    server.set_rules([{"status": 429, "retry_after": 2, "times": 1}, {"content": "fine"}])
    with pytest.raises(openai.RateLimitError) as info:
        _ask(client)
    assert info.value.status_code == 429
    assert info.value.response.headers["retry-after"] == "2"
    assert _ask(client).choices[0].message.content == "fine"
    assert server.stats()["count"] == 2


def test_500_is_internal_server_error(server, client):
    server.set_rules([{"status": 500}])
    with pytest.raises(openai.InternalServerError):
        _ask(client)


def test_hang_times_out(server):
    server.set_rules([{"hang": True}])
    c = openai.OpenAI(base_url=server.base_url, api_key="k", max_retries=0, timeout=0.5)
    with pytest.raises(openai.APITimeoutError):  # the server would hang for an hour: the client timed out
        _ask(c)
    c.close()
    # the hanging handler notices the closed connection and is released
    deadline = time.monotonic() + 2
    while server.stats()["in_flight"] and time.monotonic() < deadline:
        time.sleep(0.02)
    assert server.stats()["in_flight"] == 0


def test_malformed_body_raises(server, client):
    server.set_rules([{"malformed_body": True}])
    with pytest.raises(json.JSONDecodeError):  # what the openai client raises on a cut-off body
        _ask(client)


def test_truncated_and_finish_reason_override(server, client):
    server.set_rules([{"truncated": "partial", "times": 1},
                      {"content": "c", "finish_reason": "length"}])
    r1 = _ask(client)
    assert (r1.choices[0].message.content, r1.choices[0].finish_reason) == ("partial", "length")
    assert _ask(client).choices[0].finish_reason == "length"


SCHEMA = {
    "type": "object",
    "properties": {
        "label": {"type": "string", "enum": ["pos", "neg"]},
        "reason": {"type": "string"},
        "score": {"type": "number"},
        "count": {"type": "integer"},
        "flag": {"type": "boolean"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "inner": {"type": "object", "properties": {"a": {"type": "integer"}},
                  "required": ["a"]},
        "optional": {"type": "string"},
    },
    "required": ["label", "reason", "score", "count", "flag", "tags", "inner"],
}
EXPECTED = {"label": "pos", "reason": "x", "score": 0, "count": 0, "flag": False,
            "tags": [], "inner": {"a": 0}}


def test_echo_schema_default_json_schema(server, client):
    server.set_rules([{"match": {"response_format_type": "json_schema"},
                       "echo_schema_default": True}])
    rf = {"type": "json_schema", "json_schema": {"name": "out", "schema": SCHEMA}}
    resp = _ask(client, response_format=rf)
    assert json.loads(resp.choices[0].message.content) == EXPECTED
    # the rule does not apply without a response_format
    assert _ask(client).choices[0].message.content == "ok"


def test_echo_schema_default_json_object(server, client):
    server.set_rules([{"match": {"response_format_type": "json_object"},
                       "echo_schema_default": True}])
    resp = _ask(client, response_format={"type": "json_object", "schema": SCHEMA})
    assert json.loads(resp.choices[0].message.content) == EXPECTED


def test_schema_default_refs():
    schema = {"$defs": {"Lab": {"enum": ["b", "a"]}},
              "type": "object", "properties": {"l": {"$ref": "#/$defs/Lab"},
                                               "o": {"anyOf": [{"type": "null"},
                                                               {"type": "integer"}]}},
              "required": ["l", "o"]}
    assert schema_default(schema) == {"l": "b", "o": 0}


def test_concurrency_max_in_flight(server):
    server.set_rules([{"delay": 0.3, "content": "slow"}])
    c = openai.OpenAI(base_url=server.base_url, api_key="k", max_retries=0, timeout=5)
    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda _: _ask(c).choices[0].message.content, range(8)))
    c.close()
    assert results == ["slow"] * 8
    stats = server.stats()
    assert stats["count"] == 8
    assert stats["max_in_flight"] == 8
    assert stats["in_flight"] == 0


def test_unknown_path_404(server):
    import urllib.error
    import urllib.request
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(server.root_url + "/nope", timeout=5)
    assert info.value.code == 404
    assert "error" in json.loads(info.value.read())


def test_process_mode():
    with FakeOpenAIServer(rules=[{"content": "from-child"}], mode="process") as srv:
        c = openai.OpenAI(base_url=srv.base_url, api_key="k", max_retries=0, timeout=5)
        assert _ask(c).choices[0].message.content == "from-child"
        srv.set_rules([{"json": [1, 2]}])
        assert json.loads(_ask(c).choices[0].message.content) == [1, 2]
        assert srv.stats()["count"] == 2
        assert len(srv.requests()) == 2
        c.close()
        proc = srv._proc
    assert proc is not None and proc.poll() is not None


def test_empty_choices(server, client):
    server.set_rules([{"empty_choices": True}])
    resp = _ask(client)
    assert resp.choices == [] and resp.id == "chatcmpl-empty"


def test_error_message_code_and_raw_retry_after(server, client):
    server.set_rules([{"status": 400, "message": "too long", "code": "context_length_exceeded", "times": 1},
                      {"status": 429, "retry_after": "soon"}])
    with pytest.raises(openai.BadRequestError) as info:
        _ask(client)
    assert info.value.body == {"message": "too long", "type": "fake_error", "code": "context_length_exceeded"}
    with pytest.raises(openai.RateLimitError) as info:
        _ask(client)
    assert info.value.response.headers["retry-after"] == "soon"


def test_sample_draws_are_fresh_per_repeat_and_reproducible(server, client):
    """`sample: [lo, hi)` matches when the request's draw falls in it. The draw depends on the body and
    how often that body was seen, so 200 repeats of one request draw 200 times; reset replays them."""
    server.set_rules([{"match": {"sample": [0.0, 0.2]}, "content": "fault"}, {"content": "fine"}])

    def run():
        return [_ask(client).choices[0].message.content for _ in range(200)]

    first = run()
    # Binomial(200, 0.2): mean 40, sd 5.7; the draws are fixed by sha256, so this is not flaky
    assert 20 <= first.count("fault") <= 60 and set(first) == {"fault", "fine"}
    server.reset()
    server.set_rules([{"match": {"sample": [0.0, 0.2]}, "content": "fault"}, {"content": "fine"}])
    assert run() == first
