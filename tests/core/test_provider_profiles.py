"""Provider profiles: the fake server behaving as real OpenAI-compatible providers (refusals with their own
messages, ignored and clamped parameters, reasoning tokens in usage), the static parameter check that stops a
config with one line before any call, and every shipped paper config's params sent through the real client to
a fake server running its endpoint's profile. Real HTTP throughout; the openai client is never monkeypatched."""
from __future__ import annotations

import copy
import io
import json
import subprocess
import sys
import urllib.error
import urllib.request

import openai
import pytest
import yaml

from aura.simulator import profiles as fake_profiles
from aura.cli import main
from aura.config import ConfigError, read_raw, validate_config
from aura.llm import Cache, LLMClient, LLMRequest, providers
from aura.llm.accounting import Accounting
from conftest import REPO, available_again, base_config
from aura.simulator.server import FakeOpenAIServer

SCHEMA = {"type": "object", "properties": {"label": {"enum": ["Safe", "Unsafe"]}, "rationale": {"type": "string"}},
          "required": ["label", "rationale"], "additionalProperties": False}
ANSWER = {"label": "Safe", "rationale": "x"}
USER = [{"role": "user", "content": "Is this safe?"}]
PAPER_CONFIGS = ["config/paper.yaml", "config/pasbench.yaml", "config/lpsbench.yaml", "config/open-weights.yaml"]


@pytest.fixture(scope="module")
def servers():
    """One fake server per profile, for the whole module."""
    started = {name: FakeOpenAIServer(profile=name).start() for name in fake_profiles.PROFILES}
    yield started
    for srv in started.values():
        srv.stop()


@pytest.fixture
def srv(servers, request):
    """The server of the profile named by the test's parameter `profile`, reset."""
    server = servers[request.node.callspec.params["profile"]]
    server.reset()
    yield server
    server.reset()


def chat(server, **kw):
    client = openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=0)
    return client.chat.completions.create(**{"messages": USER, **kw})


# --- refusals, each with its provider's message as the openai client raises it -----------------------------
REFUSALS = [
    ("openai-reasoning", dict(model="gpt-5.4", max_tokens=64),
     "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead."),
    ("openai-reasoning", dict(model="o1", temperature=0),
     "Unsupported value: 'temperature' does not support 0 with this model. Only the default (1) value is supported."),
    ("openai-reasoning", dict(model="gpt-5", top_p=0.9),
     "Unsupported value: 'top_p' does not support 0.9 with this model. Only the default (1) value is supported."),
    ("openai-reasoning", dict(model="gpt-5.2", temperature=0.2),  # without reasoning_effort none
     "Unsupported value: 'temperature' does not support 0.2 with this model. Only the default (1) value is supported."),
    ("openai-reasoning", dict(model="o3", presence_penalty=0.5),
     "Unsupported parameter: 'presence_penalty' is not supported with this model."),
    ("openai-reasoning", dict(model="gpt-5.1", reasoning_effort="minimal"),
     "Unsupported value: 'minimal' is not supported with the 'gpt-5.1' model. Supported values are: 'none', 'low', "
     "'medium', and 'high'."),
    ("openai-reasoning", dict(model="o1-mini", messages=[{"role": "system", "content": "Be brief."}, *USER]),
     "Unsupported value: 'messages[0].role' does not support 'system' with this model."),
    ("openai-reasoning", dict(model="o1-mini", response_format={"type": "json_schema", "json_schema": {
        "name": "a", "schema": SCHEMA}}),
     "Invalid parameter: 'response_format' of type 'json_schema' is not supported with this model. Learn more about "
     "supported models at the Structured Outputs guide: https://platform.openai.com/docs/guides/structured-outputs"),
    ("anthropic-openai-layer", dict(model="claude-sonnet-4-5-20250929", temperature=0.7, top_p=0.9),
     "`temperature` and `top_p` cannot both be specified for this model. Please use only one."),
    ("anthropic-openai-layer", dict(model="claude-opus-4-6", n=2), "n: only a value of 1 is supported"),
    ("gemini-openai-layer", dict(model="gemini-2.5-pro", reasoning_effort="none"),
     "Budget 0 is invalid. This model only works in thinking mode."),
    ("gemini-openai-layer", dict(model="gemini-3-flash-preview", reasoning_effort="minimal"),
     "Invalid reasoning_effort: minimal. Valid values are: high, low, medium, none"),
    ("gemini-openai-layer", dict(model="gemini-3-pro-preview", reasoning_effort="medium"),
     "Invalid reasoning_effort: medium. Valid values are: high, low"),
    ("deepseek", dict(model="deepseek-chat", response_format={"type": "json_object"}),
     "Prompt must contain the word 'json' in some form to use 'response_format' of type 'json_object'."),
    ("deepseek", dict(model="deepseek-chat", response_format={"type": "json_schema", "json_schema": {
        "name": "a", "schema": SCHEMA}}), "This response_format type is unavailable now"),
    ("deepseek", dict(model="deepseek-reasoner", logprobs=True), "logprobs is not supported by deepseek-reasoner"),
]


@pytest.mark.parametrize("profile, kw, message", REFUSALS, ids=[f"{p}-{k['model']}" for p, k, _ in REFUSALS])
def test_refusal_with_the_providers_message(srv, profile, kw, message):
    with pytest.raises(openai.BadRequestError) as err:
        chat(srv, **kw)
    assert err.value.status_code == 400
    assert err.value.message == f"Error code: 400 - {message}"
    assert err.value.body["message"] == message
    assert srv.request_count() == 1 and srv.requests()[0]["body"]["model"] == kw["model"]  # logged as sent


@pytest.mark.parametrize("profile, kw", [
    ("openai-reasoning", dict(model="gpt-5.4", temperature=0.2, top_p=0.5, reasoning_effort="none")),
    ("openai-reasoning", dict(model="o1", temperature=1, max_completion_tokens=500)),  # the default is taken
    ("openai-reasoning", dict(model="gpt-4.1", temperature=0, max_tokens=64)),  # not a reasoning model
    ("openai-reasoning", dict(model="gpt-5-chat-latest", temperature=0)),
    ("anthropic-openai-layer", dict(model="claude-sonnet-4-20250514", temperature=0.7, top_p=0.9)),
    ("gemini-openai-layer", dict(model="gemini-2.5-flash", reasoning_effort="none", temperature=0)),
    ("deepseek", dict(model="deepseek-chat", response_format={"type": "json_object"},
                      messages=[{"role": "user", "content": "Answer in JSON."}])),
    ("vllm", dict(model="m", seed=3, response_format={"type": "json_schema", "json_schema": {"name": "a",
                  "schema": SCHEMA}}, extra_body={"top_k": 50, "min_p": 0.05})),
], ids=lambda v: v if isinstance(v, str) else v["model"])
def test_taken_as_sent(srv, profile, kw):
    answer = chat(srv, **kw)
    assert answer.choices[0].message.content == "ok"
    sent = srv.requests()[0]["body"]
    assert {k: sent[k] for k in kw if k not in ("messages", "extra_body")} == {k: v for k, v in kw.items()
                                                                            if k not in ("messages", "extra_body")}
    info = answer.model_extra["fake_profile"]
    assert (info["ignored"], info["clamped"]) == ([], {})
    if profile == "vllm":  # extra_body lands in the JSON body, and vLLM takes it as sampling params
        assert (sent["top_k"], sent["min_p"]) == (50, 0.05)
        assert info["notes"]["extra_sampling"] == {"top_k": 50, "min_p": 0.05}


# --- ignored and clamped params: the request log (as sent) against the answer (what the provider used) --------
@pytest.mark.parametrize("profile", ["anthropic-openai-layer"])
def test_anthropic_layer_ignores_and_clamps(srv, servers, profile):
    rf = {"type": "json_schema", "json_schema": {"name": "a", "schema": SCHEMA}}
    rules = [{"match": {"response_format_type": "json_schema"}, "json": ANSWER}]  # answers only a schema request
    kw = dict(model="claude-opus-4-6", temperature=1.5, seed=7, presence_penalty=0.3, response_format=rf,
              tools=[{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}, "strict": True}}])
    srv.set_rules(rules)
    answer = chat(srv, **kw)
    sent = srv.requests()[0]["body"]
    assert (sent["temperature"], sent["seed"], sent["response_format"]) == (1.5, 7, rf)  # logged as sent
    info = answer.model_extra["fake_profile"]
    assert info["clamped"] == {"temperature": [1.5, 1]}
    assert info["ignored"] == ["response_format", "presence_penalty", "seed", "tools[].function.strict"]
    assert answer.choices[0].message.content == "ok"  # the schema never reached the model: the rule did not match
    ideal = servers["ideal"]
    ideal.reset()
    ideal.set_rules(rules)
    assert json.loads(chat(ideal, **kw).choices[0].message.content) == ANSWER  # an ideal endpoint honours it
    ideal.reset()


@pytest.mark.parametrize("profile", ["deepseek"])
def test_deepseek_reasoner_ignores_sampling_and_reports_reasoning(srv, profile):
    answer = chat(srv, model="deepseek-reasoner", temperature=0, top_p=0.5, max_tokens=8192)
    assert srv.requests()[0]["body"]["temperature"] == 0
    assert answer.model_extra["fake_profile"]["ignored"] == ["temperature", "top_p"]
    assert answer.usage.completion_tokens_details.reasoning_tokens == fake_profiles.REASONING_TOKENS


# --- usage: reasoning tokens, included in completion_tokens (billed as output) -----------------------------
@pytest.mark.parametrize("profile, kw, rule, reasoning", [
    ("openai-reasoning", dict(model="o1"), {}, 64),
    ("openai-reasoning", dict(model="gpt-5.4", max_completion_tokens=40), {}, 39),  # reasoning + answer <= cap
    ("openai-reasoning", dict(model="o3-mini"), {"reasoning_tokens": 300}, 300),
    ("gemini-openai-layer", dict(model="gemini-2.5-flash"), {}, 64),
    ("gemini-openai-layer", dict(model="gemini-2.5-flash", reasoning_effort="low"), {"reasoning_tokens": 5000}, 1024),
    ("gemini-openai-layer", dict(model="gemini-2.5-flash", reasoning_effort="none"), {}, 0),
    ("deepseek", dict(model="deepseek-reasoner"), {}, 64),
], ids=lambda v: v if isinstance(v, str) else None)
def test_reasoning_tokens_in_usage(srv, profile, kw, rule, reasoning):
    srv.set_rules([{"content": "ok", **rule}])
    usage = chat(srv, **kw).usage
    visible = 1  # the fake's answer "ok": max(1, len("ok") // 4)
    assert usage.completion_tokens_details.reasoning_tokens == reasoning
    assert usage.completion_tokens == visible + reasoning
    assert usage.total_tokens == usage.prompt_tokens + visible + reasoning


@pytest.mark.parametrize("profile, model", [("ideal", "o1"), ("openai-reasoning", "gpt-4.1"),
                                            ("gemini-openai-layer", "gemini-2.0-flash"),
                                            ("anthropic-openai-layer", "claude-opus-4-6"), ("vllm", "qwen")])
def test_no_reasoning_tokens_for_other_models(srv, profile, model):
    answer = chat(srv, model=model)
    assert answer.usage.completion_tokens_details is None and answer.usage.completion_tokens == 1
    assert ("fake_profile" in (answer.model_extra or {})) == (profile != "ideal")  # ideal: today's answer


@pytest.mark.parametrize("profile", ["gemini-openai-layer"])
def test_gemini_maps_reasoning_effort_to_a_thinking_budget(srv, profile):
    budgets = {e: chat(srv, model="gemini-2.5-flash", reasoning_effort=e).model_extra["fake_profile"]["notes"]
               for e in ("none", "low", "medium", "high")}
    assert budgets == {"none": {"thinking_budget": 0}, "low": {"thinking_budget": 1024},
                       "medium": {"thinking_budget": 8192}, "high": {"thinking_budget": 24576}}


@pytest.mark.parametrize("profile", ["openai-reasoning"])
def test_reasoning_tokens_are_billed_as_output_through_the_client(srv, profile, tmp_path):
    raw = base_config(srv.base_url, tmp_path / "cache", provider="openai-reasoning")
    raw["models"]["m"].update(model_id="o1", params={"max_completion_tokens": 1000})
    cfg = validate_config(raw)
    with LLMClient(cfg, Cache(cfg.paths["cache"]), Accounting(label="t", stream=io.StringIO())) as llm:
        (res,) = llm.run("judge", "m", [LLMRequest(item_id="a", messages=USER, prompt_name="t", prompt_sha256="0")])
    (rec,) = res.calls
    assert rec.tokens_out == 1 + fake_profiles.REASONING_TOKENS
    assert rec.cost_usd == pytest.approx((rec.tokens_in * 1.0 + rec.tokens_out * 2.0) / 1e6)


# --- the server's own controls ------------------------------------------------------------------------------
@pytest.mark.parametrize("profile", ["anthropic-openai-layer", "openai-reasoning"])
def test_batch_api_only_where_the_provider_has_one(srv, profile):
    client = openai.OpenAI(base_url=srv.base_url, api_key="x", max_retries=0)
    if profile == "anthropic-openai-layer":
        with pytest.raises(openai.NotFoundError):
            client.batches.list()
    else:
        assert client.batches.list().data == []


def test_profile_is_set_and_read_over_http():
    srv = FakeOpenAIServer().start()
    try:
        chat(srv, model="deepseek-chat", response_format={"type": "json_object"})  # ideal: taken
        srv.set_profile("deepseek")
        with pytest.raises(openai.BadRequestError):
            chat(srv, model="deepseek-chat", response_format={"type": "json_object"})
        assert srv._control("GET", "profile")["profile"] == "deepseek"
        srv.reset()  # the profile stays
        assert srv._control("GET", "profile")["profile"] == "deepseek"
        srv.set_profile("ideal")
        chat(srv, model="deepseek-chat", response_format={"type": "json_object"})
        req = urllib.request.Request(f"{srv.root_url}/_control/profile", data=b'{"profile": "nope"}', method="POST")
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.build_opener(urllib.request.ProxyHandler({})).open(req, timeout=5)
        assert err.value.code == 400
    finally:
        srv.stop()
    with pytest.raises(ValueError, match="unknown profile 'nope'"):
        FakeOpenAIServer(profile="nope")


def test_profile_in_process_mode():
    with FakeOpenAIServer(profile="openai-reasoning", mode="process") as srv:
        with pytest.raises(openai.BadRequestError, match="max_completion_tokens"):
            chat(srv, model="o1", max_tokens=5)


def test_client_and_server_know_the_same_providers():
    assert set(fake_profiles.PROVIDER_OF) == set(fake_profiles.PROFILES)  # every profile says what it emulates
    assert set(providers.PROVIDERS) == set(fake_profiles.PROVIDER_OF.values()) - {None}


# --- the static check: one line, exit code 2, before any call ------------------------------------------------
def _refused_config(tmp_path):
    raw = base_config("http://127.0.0.1:9/v1", tmp_path / "cache", provider="openai-reasoning")
    raw["models"]["m"].update(model_id="gpt-5.4", params={"max_tokens": 64, "seed": 1})
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


LINE = ("models.m.params.max_tokens: provider openai-reasoning refuses max_tokens for reasoning models; "
        "use max_completion_tokens")


def test_estimate_stops_with_one_line(tmp_path):
    path = _refused_config(tmp_path)
    proc = subprocess.run([sys.executable, "-m", "aura", "estimate", "--configfile", str(path)], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr == f"error: {path}: {LINE}\n" and proc.stdout == ""


def test_a_stage_stops_with_one_line(tmp_path, capsys):
    from aura.pipeline.registry import STAGES

    path = _refused_config(tmp_path)
    assert main([next(iter(STAGES)), "--configfile", str(path)]) == 2
    assert capsys.readouterr().err == f"error: {path}: {LINE}\n"


def error_of(raw: dict) -> str:
    with pytest.raises(ConfigError) as err:
        validate_config(raw, source="c")
    assert "\n" not in str(err.value)
    return str(err.value)


def test_family_params_are_checked_against_the_model_they_reach():
    raw = read_raw(REPO / "config/pasbench.yaml")
    assert "o1" not in raw["pasbench"]["evaluated"]  # retired since the paper: the paper config sends it nothing
    raw = available_again(raw, "o1")  # made available again, so the params reaching it are checked
    validate_config(raw, source="c")  # as the paper config sets it up (max_completion_tokens only): taken
    del raw["pasbench"]["model_params"]["o1"]  # o1 would get the paper's sampling: refused three times
    rule = "refuses {} other than 1 for reasoning models (GPT-5.1 and later take it only with reasoning_effort: none)"
    assert error_of(raw) == "c: " + "; ".join([
        "pasbench.params.max_tokens (sent to model 'o1'): provider openai-reasoning refuses max_tokens for "
        "reasoning models; use max_completion_tokens",
        f"pasbench.params.temperature (sent to model 'o1'): provider openai-reasoning {rule.format('temperature')}; "
        "leave temperature out",
        f"pasbench.params.top_p (sent to model 'o1'): provider openai-reasoning {rule.format('top_p')}; "
        "leave top_p out"])


def test_gpt_5_1_takes_sampling_with_effort_none_and_gpt_5_does_not():
    raw = read_raw(REPO / "config/lpsbench.yaml")
    raw["lpsbench"]["model_params"]["gpt-5.1"] = {"temperature": 1.0, "top_p": 0.9, "reasoning_effort": "none"}
    validate_config(raw)
    raw["lpsbench"]["model_params"]["gpt-5"] = {"top_p": 0.9, "reasoning_effort": "none"}
    assert error_of(raw) == "c: " + "; ".join([
        "lpsbench.model_params.gpt-5.top_p: provider openai-reasoning refuses top_p other than 1 for reasoning "
        "models (GPT-5.1 and later take it only with reasoning_effort: none); leave top_p out",
        "lpsbench.model_params.gpt-5.reasoning_effort: provider openai-reasoning takes reasoning_effort minimal, "
        "low, medium, high for gpt-5, not none; use one of those"])


@pytest.mark.parametrize("change, line", [
    (lambda r: r["models"]["claude-opus-4.6"]["params"].update(temperature=1.5),
     "models.claude-opus-4.6.params.temperature: provider anthropic-openai-layer clamps temperature to [0, 1] "
     "(1.5 is sent as 1); set temperature between 0 and 1"),
    (lambda r: r["models"]["claude-sonnet-4.6"]["params"].update(seed=42),
     "models.claude-sonnet-4.6.params.seed: provider anthropic-openai-layer ignores seed (its OpenAI "
     "compatibility layer drops it); leave seed out"),
    (lambda r: r["models"]["deepseek-v3.1"].update(model_id="deepseek-reasoner"),
     "models.deepseek-v3.1.params.temperature: provider deepseek ignores temperature for deepseek-reasoner "
     "(accepted, no effect); leave temperature out"),
    (lambda r: r["models"]["gemini-3.1-pro"]["params"].update(reasoning_effort="medium"),
     "models.gemini-3.1-pro.params.reasoning_effort: provider gemini-openai-layer takes reasoning_effort low, high "
     "for gemini-3.1-pro, not medium; use one of those"),
    (lambda r: r["endpoints"]["anthropic"].update(batch=True),
     "endpoints.anthropic.batch: provider anthropic-openai-layer offers no OpenAI Batch API (/v1/files, "
     "/v1/batches); set batch: false"),
    (lambda r: r["endpoints"]["anthropic"].update(structured_output="json_schema"),
     "endpoints.anthropic.structured_output: provider anthropic-openai-layer ignores response_format; set "
     "structured_output: none (the schema then goes in the prompt)"),
    (lambda r: r["endpoints"]["deepseek"].update(structured_output="json_schema"),
     "endpoints.deepseek.structured_output: provider deepseek refuses response_format json_schema (JSON mode is "
     "json_object); set structured_output: json_object"),
], ids=["clamped", "ignored", "reasoner-ignores", "gemini-effort", "no-batch-api", "anthropic-rf", "deepseek-rf"])
def test_ignored_clamped_and_endpoint_settings(change, line):
    raw = read_raw(REPO / "config/paper.yaml")
    change(raw)
    assert error_of(raw) == f"c: {line}"


def test_unknown_provider_is_a_schema_error(tmp_path):
    raw = base_config("http://127.0.0.1:9/v1", tmp_path / "cache", provider="openai")
    assert "endpoints/fake/provider: 'openai' is not one of" in error_of(raw)


def test_no_provider_no_rules(tmp_path):
    raw = base_config("http://127.0.0.1:9/v1", tmp_path / "cache")
    raw["models"]["m"].update(model_id="o1", params={"max_tokens": 64, "temperature": 0.0})
    validate_config(raw)


# --- o1-mini: the client sends no system message and no response_format ------------------------------------
@pytest.mark.parametrize("profile", ["openai-reasoning"])
def test_o1_mini_gets_its_system_prompt_in_the_user_turn(srv, profile, tmp_path):
    raw = base_config(srv.base_url, tmp_path / "cache", provider="openai-reasoning")
    raw["models"]["m"].update(model_id="o1-mini", params={"max_completion_tokens": 500})
    cfg = validate_config(raw)
    srv.set_rules([{"json": ANSWER}])
    req = LLMRequest(item_id="a", messages=[{"role": "system", "content": "You judge."}, *USER], schema=SCHEMA,
                     prompt_name="t", prompt_sha256="0")
    with LLMClient(cfg, Cache(cfg.paths["cache"]), Accounting(label="t", stream=io.StringIO())) as llm:
        (res,) = llm.run("judge", "m", [req])
    assert res.status == "ok" and res.parsed == ANSWER
    (sent,) = [r["body"] for r in srv.requests()]
    assert "response_format" not in sent and [m["role"] for m in sent["messages"]] == ["user"]
    text = sent["messages"][0]["content"]
    assert text.startswith("You judge.\n\n") and "JSON schema" in text and text.endswith("Is this safe?")


# --- every shipped paper config: each model's params, sent through the client, none refused ------------------
def _param_sets(cfg, model: str) -> list[dict | None]:
    """The params the stages send to `model` over its own (None = the model's params alone)."""
    raw, sets = cfg.raw, [None]
    if "pasbench" in raw["families"]:
        from aura.families.pasbench.judge import JUDGE_PARAMS
        from aura.families.pasbench.respond import deterministic_params, sampling_params

        pb = raw["pasbench"]
        if model in pb["evaluated"]:
            sets += [sampling_params(cfg, model, 0), deterministic_params(cfg, model)]
        if model == pb.get("judge"):
            sets.append(dict(JUDGE_PARAMS))
    if "lpsbench" in raw["families"]:
        from aura.families.lpsbench.episodes import agent_params

        lp = raw["lpsbench"]
        if model in lp["evaluated"]:
            sets.append(agent_params(cfg, model))
        if model == lp.get("evaluator"):
            sets.append({"temperature": 0.0})  # lpsbench.evaluate
    return sets


@pytest.mark.parametrize("path", PAPER_CONFIGS)
def test_shipped_config_params_meet_their_providers(servers, path, tmp_path, monkeypatch):
    raw = read_raw(REPO / path)
    validate_config(raw, source=path)  # the static check passes
    raw = copy.deepcopy(raw)
    for ep in raw["endpoints"].values():
        assert ep.get("provider") or "zhipu" in ep["base_url"] or "bigmodel" in ep["base_url"]
        ep.update(base_url=servers[ep.get("provider") or "ideal"].base_url, timeout_s=5, max_tries=1)
        if ep.get("api_key_env"):
            monkeypatch.setenv(ep["api_key_env"], "test-key")
    raw["paths"]["cache"] = str(tmp_path / "cache")
    raw["llm"]["batch"]["roles"] = []  # live calls: this test is about the request params
    cfg = validate_config(raw)
    for srv in servers.values():
        srv.reset()
        srv.set_rules([{"json": ANSWER}])
    failures = []
    with LLMClient(cfg, Cache(cfg.paths["cache"]), Accounting(label="t", stream=io.StringIO())) as llm:
        for name in cfg.models:
            reqs = [LLMRequest(item_id=f"{name}:{i}:{s}", prompt_name="t", prompt_sha256="0", params=params,
                               messages=[{"role": "system", "content": "You are a careful assistant."}, *USER],
                               schema=SCHEMA if s else None)
                    for i, params in enumerate(_param_sets(cfg, name)) for s in (0, 1)]
            try:
                results = llm.run("test", name, reqs)
            except Exception as exc:  # a refusal stops the job (FatalEndpointError): name the model
                failures.append(f"{name}: {exc}")
                continue
            failures += [f"{name}: {r.status} {r.error}" for r in results if r.status != "ok"]
    assert failures == []
    logged = [r["body"] for srv in servers.values() for r in srv.requests()]
    assert {b["model"] for b in logged} == {m.model_id for m in cfg.models.values()}
    # and nothing was dropped or clamped on the way: each param reached the model as configured
    quiet = [(name, b["model"], v.ignored, v.clamped) for name, srv in servers.items() for b in
             (r["body"] for r in srv.requests()) if (v := fake_profiles.apply(name, b)).ignored or v.clamped]
    assert quiet == []
    for body in logged:
        if body["model"] == "o1-mini":  # folded by the client: no system message, schema in the prompt
            assert [m["role"] for m in body["messages"]] == ["user"] and "response_format" not in body
    for srv in servers.values():
        srv.reset()
