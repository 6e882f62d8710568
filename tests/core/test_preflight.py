"""`aura preflight`: one short real call per (model, capability) the run uses, one line each, its cost, a record of
the result; and llm.require_preflight, which keeps every remote call back until a preflight of the same config
has passed. Against the fake server: the test config's models all sit on its one endpoint."""
from __future__ import annotations

import io
import json

import pytest
import yaml

from aura.cli import main
from aura.config import load_config
from aura.llm import Cache, LLMClient, LLMRequest
from aura.llm.accounting import Accounting
from aura.llm.errors import FatalEndpointError
from aura.preflight import plan, record_path
from conftest import base_config


def write(tmp_path, raw) -> str:
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(raw))
    return str(path)


@pytest.fixture
def raw(server, tmp_path):
    raw = base_config(server.base_url, tmp_path / "cache")
    raw["models"]["m"]["vision"] = True
    # LPS-Bench on its demo cases: m is the agent (its calls offer tools), jb plays the tools, jc evaluates
    raw["families"] = ["aura", "lpsbench"]
    raw["lpsbench"] = {"evaluated": ["m"], "emulator": "jb", "evaluator": "jc", "max_steps": 2}
    return raw


def test_the_plan_names_each_model_and_the_capabilities_its_roles_use(raw, tmp_path):
    config = load_config(write(tmp_path, raw))
    caps = dict(plan(config))
    assert caps["m"] == ["chat", "structured", "tools", "images"]  # the LPS-Bench agent, and vision: true
    assert caps["jb"] == ["chat", "structured"]  # a judge: no tools, no vision, no batch endpoint


STRUCTURED = {"match": {"response_format_type": "json_schema"}, "echo_schema_default": True}  # a JSON answer
TOOL_CALL = {"match": {"contains": "Use the tool."}, "tool_calls": [{"name": "get_time", "arguments": {}}]}


def test_every_check_passes_prints_one_line_each_and_records_the_pass(raw, tmp_path, server, capsys):
    server.set_rules([STRUCTURED, TOOL_CALL])
    path = write(tmp_path, raw)
    assert main(["preflight", "--configfile", path]) == 0
    out, err = capsys.readouterr()
    lines = out.splitlines()
    config = load_config(path)
    expected = sum(len(c) for _, c in plan(config))
    assert len(lines) == expected == server.request_count()  # one real call per line, none from the cache
    assert all(line.startswith("ok ") for line in lines)
    assert f"preflight: {expected} of {expected} checks passed; cost $" in err
    record = json.loads(record_path(config).read_text())
    assert record["passed"] is True and record["config_hash"] == config.hash and len(record["checks"]) == expected
    # the fake server: 1.0 $/Mtok in, 2.0 out; every check's tokens priced so
    assert record["cost_usd"] == pytest.approx(sum(c["tokens_in"] * 1e-6 + c["tokens_out"] * 2e-6
                                                   for c in record["checks"]))


def test_an_answer_that_does_not_parse_or_calls_no_tool_fails_its_check(raw, tmp_path, server, capsys):
    path = write(tmp_path, raw)  # no rule: the fake server answers "ok" to everything, JSON or a tool asked or not
    assert main(["preflight", "--configfile", path]) == 1
    failing = [line for line in capsys.readouterr().out.splitlines() if line.startswith("FAIL")]
    assert len(failing) == 4  # m, jb, jc: structured; m: tools
    assert sum("structured the answer does not parse against the schema" in line for line in failing) == 3
    assert sum(" m " in line and "tools      no tool call although one was required" in line for line in failing) == 1


def test_the_batch_check_lists_one_batch_of_the_api_the_endpoint_names(server, tmp_path, capsys):
    """batch: true lists one OpenAI batch at base_url; batch: anthropic one Message Batch at batch_base_url (the
    fake Anthropic server), not the OpenAI layer's absent /v1/batches. Nothing is created."""
    from aura.simulator.batch_anthropic import FakeAnthropicBatchServer

    server.set_rules([STRUCTURED])
    with FakeAnthropicBatchServer() as anth:
        for batch, extra in ((True, {}), ("anthropic", {"batch_base_url": anth.base_url})):
            raw = base_config(server.base_url, tmp_path / "cache", batch=batch, **extra)
            raw["aura"]["roles"]["judges"] = ["m", "jb", "jc"]
            path = write(tmp_path, raw)
            assert main(["preflight", "--configfile", path]) == 0
            lines = [ln for ln in capsys.readouterr().out.splitlines() if " batch " in ln]
            label = "Message Batches API" if batch == "anthropic" else "Batch API"
            assert lines and all(ln.startswith("ok ") and f"{label} listing answered" in ln for ln in lines)
        assert [r["path"].split("?")[0] for r in anth.requests()] == ["/v1/messages/batches"] * len(lines)
    assert not [r for r in server.requests() if "/batches" in r["path"] and r["method"] != "GET"]


def test_a_refused_parameter_is_one_failing_line_with_the_servers_message(raw, tmp_path, server, capsys):
    message = "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens'."
    server.set_rules([{"match": {"model": "judge-b"}, "status": 400, "code": "unsupported_parameter",
                       "message": message}, STRUCTURED, TOOL_CALL])
    path = write(tmp_path, raw)
    assert main(["preflight", "--configfile", path]) == 1
    out, err = capsys.readouterr()
    failing = [line for line in out.splitlines() if line.startswith("FAIL")]
    assert len(failing) == 2 and all(" jb " in line and message in line for line in failing)  # chat, structured
    assert "checks passed" in err and not json.loads(record_path(load_config(path)).read_text())["passed"]


def test_require_preflight_keeps_remote_calls_back_until_a_preflight_passed(raw, tmp_path, server, capsys):
    raw["llm"] = {"require_preflight": True}
    path = write(tmp_path, raw)
    config = load_config(path)
    req = LLMRequest(item_id="a", messages=[{"role": "user", "content": "hi"}], prompt_name="t.v1",
                     prompt_sha256="0" * 64)
    client = LLMClient(config, Cache(config.paths["cache"]), Accounting(label="t", stream=io.StringIO()))
    with client, pytest.raises(FatalEndpointError) as ei:
        client.run("judge", "m", [req])
    assert str(ei.value).startswith(f"llm.require_preflight: no passing preflight of this config (hash "
                                    f"{config.hash[:16]}, ")
    assert server.request_count() == 0  # nothing was sent
    server.set_rules([STRUCTURED, TOOL_CALL])
    assert main(["preflight", "--configfile", path]) == 0
    capsys.readouterr()
    sent = server.request_count()
    client = LLMClient(config, Cache(config.paths["cache"]), Accounting(label="t", stream=io.StringIO()))
    with client:
        (res,) = client.run("judge", "m", [req])
    assert res.status == "ok" and server.request_count() == sent + 1


def test_require_preflight_keeps_a_batch_back_too(server, tmp_path):
    raw = base_config(server.base_url, tmp_path / "cache", batch=True)
    raw["llm"] = {"require_preflight": True, "batch": {"roles": ["judge"], "poll_s": 0.01}}
    config = load_config(write(tmp_path, raw))
    req = LLMRequest(item_id="a", messages=[{"role": "user", "content": "hi"}], prompt_name="t.v1",
                     prompt_sha256="0" * 64)
    client = LLMClient(config, Cache(config.paths["cache"]), Accounting(label="t", stream=io.StringIO()))
    with client, pytest.raises(FatalEndpointError, match=r"^llm.require_preflight: no passing preflight"):
        client.run("judge", "m", [req])
    assert server.request_count() == 0 and server.requests() == []  # no upload, no batch, no call


# ---------------------------------------------------------------------------------------------
# measured tokens: a run's call logs, or --calibrate K, in place of the estimate's assumptions


def pas_config(server, tmp_path) -> dict:
    """PaSBench on its demo data, one evaluated model (m), judge jb; the items file is built below, so the respond
    line is exact (its requests exist) and the judge line projected (its inputs do not)."""
    raw = base_config(server.base_url, tmp_path / "cache")
    raw["families"] = ["pasbench"]
    raw["pasbench"] = {"samples": 2, "evaluated": ["m"], "judge": "jb", "knowledge_probe": False,
                       "reactive_probe": False, "propose_verify": False, "construct": {"enabled": False}}
    return raw


def test_calibrate_sends_k_requests_per_exact_line_and_the_estimate_prices_it_from_them(server, tmp_path, capsys):
    from aura.estimate import estimate
    from aura.pipeline.layout import layout

    raw = pas_config(server, tmp_path)
    path = write(tmp_path, raw)
    items = layout(load_config(path).raw)["pasbench_items"]
    assert main(["pasbench-items", "--configfile", path, "--out", f"items={items}"]) == 0
    before = {(ln.stage, ln.model): ln for ln in estimate(load_config(path))}
    respond = before[("pasbench-respond", "m")]
    assert respond.basis == "exact" and respond.calls > 3 and respond.sample
    # every answer: 40 characters (10 completion tokens, as the fake server counts) and 30 reasoning tokens on top
    server.set_rules([STRUCTURED, TOOL_CALL, {"match": {}, "content": "x" * 40, "reasoning_tokens": 30}])
    assert main(["preflight", "--configfile", path, "--calibrate", "3"]) == 0
    out, err = capsys.readouterr()
    assert "pasbench-respond" in out and "3 call(s)" in out and "not calibrated: its inputs do not exist yet" in out
    assert "preflight --calibrate 3: 3 call(s), cost $" in err
    after = {(ln.stage, ln.model): ln for ln in estimate(load_config(path))}
    ln = after[("pasbench-respond", "m")]
    # measured: completion 10 + 30 reasoning = 40 tokens out per call, 30 of them reasoning; the 3 answered calls
    # are in the cache now, so the run (and the estimate) counts them as cached
    assert (ln.basis, ln.measured_calls, ln.reasoning_each) == ("exact", 3, 30)  # calls counted, tokens measured
    assert ln.calls == respond.calls - 3 and ln.cached == respond.cached + 3
    assert ln.tokens_out == 40 * ln.calls and ln.reasoning_tokens == 30 * ln.calls
    assert ln.cost_usd == pytest.approx((ln.tokens_in * 1.0 + ln.tokens_out * 2.0) / 1e6)
    assert after[("pasbench-judge (m)", "jb")].measured_calls == 0  # its inputs do not exist: not calibrated
