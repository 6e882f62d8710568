"""`aura preflight` checks how open-weight models are served (models.*.serving): a reasoning model (DeepSeek-R1 as
LPS-Bench's evaluator) must answer with its reasoning separated and a parseable verdict; an agent whose server
needs a tool-call parser must return structured tool_calls for tool_choice auto. The fake server plays vLLM
without the parsers (the <think> block in content, tool_choice auto refused) and with them (reasoning_content);
the real openai client over HTTP."""
from __future__ import annotations

import yaml

from aura.cli import main
from aura.config import load_config
from aura.llm import LLMClient, LLMRequest
from aura.preflight import plan
from conftest import base_config

STRUCTURED = {"match": {"response_format_type": "json_schema"}, "echo_schema_default": True}
TOOL_CALL = {"match": {"contains": "Use the tool."}, "tool_calls": [{"name": "get_time", "arguments": {}}]}


def config_file(server, tmp_path) -> str:
    raw = base_config(server.base_url, tmp_path / "cache", provider="vllm")
    raw["families"] = ["aura", "lpsbench"]
    raw["lpsbench"] = {"evaluated": ["m"], "emulator": "jb", "evaluator": "jc", "max_steps": 2}
    raw["models"]["m"].update(model_id="Qwen/Qwen3-8B", serving={"reasoning_parser": None, "tool_call_parser": "hermes"})
    raw["models"]["m"]["params"]["chat_template_kwargs"] = {"enable_thinking": True}
    raw["models"]["jc"].update(model_id="deepseek-ai/DeepSeek-R1", serving={"reasoning_parser": "deepseek_r1"})
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(raw))
    return str(path)


def test_the_serving_checks_are_planned_for_the_models_that_state_parsers(server, tmp_path):
    caps = dict(plan(load_config(config_file(server, tmp_path))))
    assert caps["jc"] == ["chat", "structured", "reasoning"] and caps["m"] == ["chat", "structured", "tools"]


def test_vllm_without_its_parsers_fails_one_line_per_model_naming_the_missing_parser(server, tmp_path, capsys):
    server.set_rules([STRUCTURED, TOOL_CALL])
    server.set_profile("vllm-no-parsers")
    assert main(["preflight", "--configfile", config_file(server, tmp_path)]) == 1
    failing = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("FAIL")]
    assert len(failing) == 2, failing
    [r1] = [ln for ln in failing if " reasoning " in ln]
    assert " jc " in r1 and "model jc: its server needs --reasoning-parser deepseek_r1: its reasoning came inside " \
                            "content (a <think> block)" in r1
    [tools] = [ln for ln in failing if " tools " in ln]
    assert " m " in tools and "model m: its server needs --enable-auto-tool-choice --tool-call-parser hermes: " in tools
    assert '"auto" tool choice requires --enable-auto-tool-choice' in tools  # the server's own words follow
    sent = [r["body"] for r in server.requests() if (r.get("body") or {}).get("tools")]
    assert sent and all(b["tool_choice"] == "auto" for b in sent)  # as the agent sends it


def test_vllm_with_its_parsers_passes_and_qwen3s_thinking_switch_is_sent(server, tmp_path, capsys):
    server.set_rules([STRUCTURED, TOOL_CALL])
    server.set_profile("vllm-parsers")
    assert main(["preflight", "--configfile", config_file(server, tmp_path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert all(ln.startswith("ok ") for ln in out) and any(" jc " in ln and " reasoning " in ln for ln in out)
    qwen = [r["body"] for r in server.requests() if (r.get("body") or {}).get("model") == "Qwen/Qwen3-8B"]
    assert qwen and all(b["chat_template_kwargs"] == {"enable_thinking": True} for b in qwen)


def test_chat_template_kwargs_goes_only_to_a_vllm_endpoint(server, tmp_path):
    path = config_file(server, tmp_path)
    raw = yaml.safe_load(open(path))
    raw["endpoints"]["fake"]["provider"] = None
    open(path, "w").write(yaml.safe_dump(raw))
    req = LLMRequest(item_id="a", messages=[{"role": "user", "content": "hi"}], prompt_name="t.v1",
                     prompt_sha256="0" * 64)
    with LLMClient(load_config(path)) as client:
        try:
            client.run("agent", "m", [req])
        except Exception as exc:  # noqa: BLE001
            assert "chat_template_kwargs is a vLLM param and endpoint 'fake' is not provider vllm" in str(exc)
        else:
            raise AssertionError("sent")
    assert server.request_count() == 0
