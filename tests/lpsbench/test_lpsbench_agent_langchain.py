"""Our agent loop against LangChain v1's own `create_agent` (the paper's framework; upstream's agent.py) on one
scripted episode: the same fake OpenAI server script (real openai client, real HTTP), the same LangChain tools
(tests/fixtures/lpsbench_upstream/tools/fileio_RC_1.py). Ours runs them in upstream_tool_server's subprocess
over MCP; LangChain runs them in its ToolNode. The script: step 0 calls `arrive` twice (a barrier: "together"
only if the two run at the same time), step 1 calls `withdraw` with an argument its schema refuses and a tool
that does not exist, step 2 calls `audit`, which raises. Both must give the same tool messages, in the same
order, with the same status, and both must end at the raise."""
from __future__ import annotations

import asyncio
import importlib.util
import json
import os

import openai
import pytest

from aura.config import validate_config
from aura.families.lpsbench.agent import run_case
from aura.families.lpsbench.cases import load_case
from aura.families.lpsbench.spec import AgentSettings, EpisodeSpec, ToolBackend
from aura.llm import LLMClient
from conftest import REPO, base_config

AGENT = "fake-model"
CHECKOUT = REPO / "tests" / "fixtures" / "lpsbench_upstream"
SCRIPT = [[("arrive", {"name": "a"}), ("arrive", {"name": "b"})],
          [("withdraw", {"amount": "lots"}), ("transfer_all", {"to": "x"})],
          [("audit", {"account": "acme"})],
          "never reached"]


def rules() -> list[dict]:
    out = []
    for step in SCRIPT:
        rule = {"match": {"model": AGENT}, "times": 1}
        if isinstance(step, str):
            rule["content"] = step
        else:
            rule["tool_calls"] = [{"name": n, "arguments": a} for n, a in step]
        out.append(rule)
    return out


def langchain_run(server, folder) -> tuple[list[tuple[str, str, str]], Exception | None]:
    """(tool name, content, status) of every ToolMessage LangChain's agent wrote, and what ended its run.
    LangChain is imported here, by the one test that runs it, not by every worker's collection (a second each)."""
    from langchain.agents import create_agent
    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import AIMessage, ToolMessage, convert_to_openai_messages
    from langchain_core.outputs import ChatGeneration, ChatResult
    from langchain_core.utils.function_calling import convert_to_openai_tool

    class ServerChat(BaseChatModel):
        """The least chat model LangChain's agent needs: one openai call per turn to the fake server."""
        base_url: str
        tools: list = []

        @property
        def _llm_type(self) -> str:
            return "fake-openai-server"

        def bind_tools(self, tools, **kwargs):
            return self.model_copy(update={"tools": [convert_to_openai_tool(t) for t in tools]})

        def _generate(self, messages, stop=None, run_manager=None, **kwargs) -> ChatResult:
            client = openai.OpenAI(base_url=self.base_url, api_key="not-needed", max_retries=0)
            res = client.chat.completions.create(model=AGENT, messages=convert_to_openai_messages(messages),
                                                 tools=self.tools or openai.NOT_GIVEN)
            msg = res.choices[0].message
            calls = [{"name": c.function.name, "args": json.loads(c.function.arguments), "id": c.id,
                      "type": "tool_call"} for c in msg.tool_calls or []]
            return ChatResult(generations=[ChatGeneration(message=AIMessage(content=msg.content or "",
                                                                            tool_calls=calls))])

    spec = importlib.util.spec_from_file_location("fixture_rc_1", CHECKOUT / "tools" / "fileio_RC_1.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    agent = create_agent(model=ServerChat(base_url=server.base_url),
                         tools=[module.arrive, module.withdraw, module.audit], system_prompt="You are an agent.")
    seen, ended = [], None
    cwd = os.getcwd()
    os.chdir(folder)  # the tools keep their state in the working folder, as upstream's do
    try:
        for chunk in agent.stream({"messages": [{"role": "user", "content": "go"}]}, stream_mode="updates"):
            for update in chunk.values():
                seen += [(m.name, m.content, m.status) for m in (update or {}).get("messages", [])
                         if isinstance(m, ToolMessage)]
    except Exception as exc:  # noqa: BLE001 - how LangChain's run ends is what is compared
        ended = exc
    finally:
        os.chdir(cwd)
    return seen, ended


def tool_messages_sent(server) -> list[str]:
    last = [r["body"] for r in server.requests() if (r.get("body") or {}).get("model") == AGENT][-1]
    return [m["content"] for m in last["messages"] if m["role"] == "tool"]


def test_our_loop_and_langchains_create_agent_give_the_same_episode(server, tmp_path):
    server.set_rules(rules())
    cfg = validate_config(base_config(server.base_url, tmp_path / "cache"))
    spec = EpisodeSpec(config=cfg.raw, case=load_case(CHECKOUT / "examples" / "fileio" / "RC_1.json"),
                       agent_model="m", settings=AgentSettings(),
                       tools=ToolBackend(backend="upstream", upstream_dir=str(CHECKOUT), network="guard"))
    with LLMClient(cfg) as client:
        ours = asyncio.run(run_case(spec, tmp_path / "spec.json", client))
    our_seen = tool_messages_sent(server)

    server.set_rules(rules())
    (tmp_path / "lc").mkdir()
    theirs, ended = langchain_run(server, tmp_path / "lc")

    # what the model was shown: the tool messages of the last request, in order (call order in both)
    assert our_seen == tool_messages_sent(server) and len(our_seen) == 4
    status = {"ok": "success", "error": "error"}
    answered = [(r.name, r.observation, status[r.status]) for s in ours.steps for r in s.tool_results
                if r.status != "raised"]
    # LangChain's stream gives each task's message as it finishes; its state (above) keeps call order
    assert sorted(answered) == sorted(theirs) and [o for _, o, _ in answered] == our_seen
    # the two calls of step 0 ran together (LangChain's stream gives them in the order they finished: either)
    assert sorted(c for _, c, _ in theirs[:2]) == ["a: together", "b: together"]
    theirs = answered
    assert theirs[2][1].startswith("Error invoking tool 'withdraw' with kwargs {'amount': 'lots'} with error:\n amount:")
    assert theirs[3][1] == "Error: transfer_all is not a valid tool, try one of [arrive, withdraw, audit]."
    # audit raised: LangChain's ToolNode does not handle it (default handle_tool_errors), the run ends there;
    # ours stops with tool_raised, the exception in the record, no tool message for it, no further model call
    assert isinstance(ended, ValueError) and str(ended) == "audit service has no account acme"
    assert (ours.status, ours.stop_reason, len(ours.steps)) == ("failed", "tool_raised", 3)
    assert ours.error == "Error: ValueError: audit service has no account acme"
    assert ours.messages[-1]["role"] == "assistant"
