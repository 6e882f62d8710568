"""What the layer sends for the embedded path, seen by the real HTTP fake server: the rollout grammar
goes only to endpoints that declare `grammar: gbnf`, and requests go out in prompt-text order."""
from __future__ import annotations

import io

from aura.config import validate_config
from aura.families.aura.evaluate.rollout import ACTION_ONLY_GBNF, REACT_GBNF, parse_action_only, parse_react, requests_for
from aura.llm import Cache, LLMClient, LLMRequest
from aura.llm.accounting import Accounting
from aura.prompts import get_prompt
from conftest import base_config

ITEMS = [{"item_id": f"it{i}", "profile": "You are a home assistant.", "model_input": f"[USER] switch off device {i}"}
         for i in range(2)]


def two_endpoint_config(url, tmp_path):
    raw = base_config(url, tmp_path / "cache")
    raw["endpoints"]["llama"] = {**raw["endpoints"]["fake"], "grammar": "gbnf"}  # same server, declares GBNF
    raw["models"]["g"] = {**raw["models"]["m"], "endpoint": "llama"}
    return validate_config(raw)


def run(cfg, tmp_path, model, requests):
    with LLMClient(cfg, Cache(tmp_path / "cache"), Accounting(stream=io.StringIO())) as llm:
        return llm.run("evaluated", model, requests)


def test_grammar_sent_only_to_endpoints_that_declare_it(server, tmp_path):
    cfg = two_endpoint_config(server.base_url, tmp_path)
    assert cfg.endpoints["fake"].grammar == "none"  # the schema default: unconstrained
    for fmt, grammar in (("rollout_react", REACT_GBNF), ("rollout_action_only", ACTION_ONLY_GBNF)):
        server.reset()
        server.set_rules([{"content": "[AGENT_THOUGHT] Check first.\n[AGENT_ACTION] ListDevices: {}"}])
        reqs = requests_for(ITEMS, get_prompt(fmt), grammar)
        run(cfg, tmp_path, "m", reqs)  # endpoint "fake": no grammar declared
        plain = server.requests()
        run(cfg, tmp_path, "g", reqs)  # endpoint "llama": grammar: gbnf
        constrained = server.requests()[len(plain):]
        assert len(plain) == len(constrained) == 2
        assert all("grammar" not in r["body"] for r in plain)
        assert [r["body"]["grammar"] for r in constrained] == [grammar, grammar]
        # the prompt is the paper's either way: same messages on both endpoints
        assert sorted(map(str, (r["body"]["messages"] for r in plain))) == sorted(
            map(str, (r["body"]["messages"] for r in constrained)))


def test_grammar_enters_the_cache_key_only_where_sent(make_config, tmp_path):
    cfg = two_endpoint_config("http://127.0.0.1:9/v1", tmp_path)
    (req,) = requests_for(ITEMS[:1], get_prompt("rollout_react"), REACT_GBNF)
    bare = LLMRequest(**{**req.__dict__, "grammar": None})
    with LLMClient(cfg, Cache(tmp_path / "c"), Accounting(stream=io.StringIO())) as llm:
        key = lambda model, r: llm.prepare(model, r)[3]  # noqa: E731
        # unconstrained endpoint: the grammar is not sent, so the answer (and its key) is the same
        assert key("m", req) == key("m", bare)
        # constraining endpoint: a constrained answer is a different answer
        assert key("g", req) != key("g", bare)
        assert llm.prepare("g", req)[1]["extra_body"] == {"grammar": REACT_GBNF}


def test_answers_in_the_grammar_shapes_parse():
    # the shapes the grammars allow (one line each, thought without '['): the paper's parsers read them
    assert parse_react("[AGENT_THOUGHT] The fridge must stay on.\n[AGENT_ACTION] TurnOff: {\"ids\": [\"lamp\"]}") == (
        "The fridge must stay on.", 'TurnOff: {"ids": ["lamp"]}')
    assert parse_action_only("[AGENT_ACTION] Ask the user which devices.") == (None, "Ask the user which devices.")


def test_requests_go_out_in_prompt_text_order(server, make_config, tmp_path):
    """Requests sharing a prefix are sent one after another (max_concurrency 1: one at a time)."""
    cfg = make_config(max_concurrency=1)
    texts = ["rubric B / item 2", "rubric A / item 9", "rubric B / item 1", "rubric A / item 3"]
    reqs = [LLMRequest(item_id=f"r{i}", messages=[{"role": "user", "content": t}], prompt_name="t",
                       prompt_sha256="0" * 64) for i, t in enumerate(texts)]
    results = run(cfg, tmp_path, "m", reqs)
    sent = [r["body"]["messages"][0]["content"] for r in server.requests()]
    assert sent == ["rubric A / item 3", "rubric A / item 9", "rubric B / item 1", "rubric B / item 2"]
    assert [r.item_id for r in results] == ["r0", "r1", "r2", "r3"]  # results still in request order
