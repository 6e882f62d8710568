"""An MCP tool server (stdio) for one LPS-Bench episode, answered by an LM-emulated environment.

    python -m aura.families.lpsbench.tool_server <episode spec file>

It lists the case's tools (name, description, JSON-schema parameters: an upstream case's real signatures,
read from its module's source with ``ast``, or a generated case's own specs) and answers each call with an
observation written by the emulator model (prompts/lpsbench/emulator.v2.md). The emulator sees the user's
task, the tools, their behaviour (an upstream case's mock-module source; a generated case's behaviour notes)
and the call. It is never told the case's risk category nor asked to make the episode risky: whatever the
environment plants (a backdoor payload, a changing state) comes from the behaviour it is given. It sees no
episode history: an answer depends on the call alone, as upstream's mock functions mostly do, so with the
LLM layer's cache every agent meets the same environment for the same call (the cache key holds the
messages, not the agent or the step).

A call to an unknown tool, or with arguments its schema rejects, gets the error a real server would
give (no emulator call). An emulator call that fails is answered as an error whose structured content
says ``{"status": "failed"}``, so the agent loop can stop the episode instead of feeding the agent an
invented error. A job-level failure of the emulator's or simulated user's endpoint (a bad key, an unknown
model, the failure ceiling: `StageFailed`) says ``{"status": "fatal"}``: the agent loop raises it in the
job, which stops with that one line and writes nothing (it is not one episode's failure). Nothing but MCP
messages is written on stdout; progress and errors go to stderr.

Call records (spec ``emulator_calls``): each call's record is appended to that file as the call completes (one
JSON line, one write), so a server killed mid-episode leaves every answer it was delivered in the job's accounting.
A retried episode's new server appends to the same file.

With the ask_user extension (an opt-in beyond the paper; spec ``user_model`` set), mitigated benign
episodes get one more tool, ``ask_user(question)``, answered by a simulated user
(prompts/lpsbench/user_simulator.v2.md) who knows the task and the questions answered so far, never the
case's criterion; its calls are cached like the emulator's.
"""
from __future__ import annotations

import json
import os
import sys
from dataclasses import asdict
from typing import Any

import anyio
import jsonschema
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

from aura.config import UserError
from aura.llm import LLMClient, LLMRequest
from aura.llm.accounting import Accounting, CallRecord
from aura.llm.errors import StageFailed
from aura.prompts import get_prompt

from .cases import ToolSpec
from .spec import EMULATOR_PROMPT, USER_PROMPT, EpisodeSpec, load_spec

ROLE = "lps_emulator"
USER_ROLE = "lps_user"
ASK_USER = ToolSpec(name="ask_user",
                    description="Ask the user a question (to clarify or confirm something) and get their reply.",
                    parameters={"type": "object", "properties": {"question": {"type": "string", "minLength": 1}},
                                "required": ["question"], "additionalProperties": False})


def _args_text(arguments: dict) -> str:
    return json.dumps(arguments, sort_keys=True, ensure_ascii=False)


def _tools_text(tools: list[ToolSpec]) -> str:
    lines = []
    for t in tools:
        lines.append(f"- {t.name}: {t.description}".rstrip())
        lines.append(f"  parameters: {json.dumps(t.parameters, sort_keys=True, ensure_ascii=False)}")
    return "\n".join(lines)


class StreamedAccounting(Accounting):
    """The server's accounting, each call record appended to `path` as the call completes (not at exit)."""

    def __init__(self, path: str | None):
        super().__init__(ROLE, stream=sys.stderr)
        self.path = path

    def add_call(self, rec: CallRecord) -> None:
        super().add_call(rec)
        if self.path:
            line = json.dumps(asdict(rec), ensure_ascii=False, sort_keys=True) + "\n"
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, line.encode("utf-8"))
            finally:
                os.close(fd)


class EmulatedEnvironment:
    """The case's tools, answered by the emulator model; counts the episode's calls (their item ids)."""

    def __init__(self, spec: EpisodeSpec, client: LLMClient):
        self.spec, self.client = spec, client
        self.tools = spec.case.tools()
        if spec.user_model is not None:  # spec.check refuses a case with its own ask_user
            self.tools.append(ASK_USER)
        self.by_name = {t.name: t for t in self.tools}
        self.prompt = get_prompt(EMULATOR_PROMPT)
        self.user_prompt = get_prompt(USER_PROMPT) if spec.user_model is not None else None
        self.history: list[tuple[str, dict, str]] = []  # (tool, arguments, what it returned)
        self.questions: list[tuple[str, str]] = []  # ask_user: (question, the user's answer)

    def listing(self) -> list[types.Tool]:
        return [types.Tool(name=t.name, description=t.description, input_schema=t.parameters) for t in self.tools]

    def behaviour(self) -> str:
        """The tools' behaviour shown to the emulator: the module source, else each spec's behaviour note."""
        if self.spec.behaviour:
            return self.spec.behaviour
        notes = [f"- {t.name}: {t.behaviour}" for t in self.tools if t.behaviour]
        return "\n".join(notes) or "(no behaviour given: answer as a typical tool of this name would)"

    def messages(self, name: str, arguments: dict) -> list[dict]:
        tools = [t for t in self.tools if t is not ASK_USER]
        return self.prompt.render(instruction=self.spec.case.instruction, tools=_tools_text(tools),
                                  behaviour=self.behaviour(), tool_name=name, arguments=_args_text(arguments))

    async def call(self, name: str, arguments: dict[str, Any] | None) -> types.CallToolResult:
        arguments = arguments or {}
        tool = self.by_name.get(name)
        if tool is None:
            return self._answer(name, arguments, f"Error: unknown tool '{name}'", "rejected")
        err = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(tool.parameters).iter_errors(arguments))
        if err is not None:
            where = "/".join(map(str, err.absolute_path)) or "arguments"
            return self._answer(name, arguments, f"Error: invalid arguments for {name}: {where}: {err.message}",
                                "rejected")
        n = len(self.history) + 1
        if tool is ASK_USER:
            role, model, prompt, messages = USER_ROLE, self.spec.user_model, self.user_prompt, \
                self.user_messages(arguments["question"])
        else:
            role, model, prompt, messages = ROLE, self.spec.emulator_model, self.prompt, self.messages(name, arguments)
        # the emulator answers a call the same way in every episode (sample 0): a deterministic environment;
        # the simulated user follows the episode's sample
        sample = self.spec.sample if tool is ASK_USER else 0
        req = LLMRequest(item_id=f"{self.spec.case.case_id}:s{self.spec.sample}:tool{n}", messages=messages,
                         prompt_name=prompt.ref, prompt_sha256=prompt.sha256, sample_index=sample)
        try:
            [res] = await self.client.arun(role, model, [req], desc=f"{role}:{name}")
        except StageFailed as exc:  # a bad key, unknown model, the ceiling: the job must stop, not the episode
            return self._failed(name, " ".join(str(exc).split()), status="fatal")
        except Exception as exc:  # noqa: BLE001 - anything else fails this episode, told, not hidden
            return self._failed(name, f"{type(exc).__name__}: {exc}")
        if res.status != "ok":
            return self._failed(name, res.error or res.status)
        text = (res.text or "").strip() or "(no output)"
        if tool is ASK_USER:
            self.questions.append((arguments["question"], text))
        return self._answer(name, arguments, text, "ok")

    def user_messages(self, question: str) -> list[dict]:
        history = "\n".join(f"Q: {q}\nA: {a}" for q, a in self.questions) or "(none yet)"
        return self.user_prompt.render(instruction=self.spec.case.instruction, history=history, question=question)

    def _answer(self, name: str, arguments: dict, text: str, status: str) -> types.CallToolResult:
        self.history.append((name, arguments, text))
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=status != "ok",
                                    structured_content={"status": status})

    @staticmethod
    def _failed(name: str, error: str, status: str = "failed") -> types.CallToolResult:
        text = f"emulated environment failed on {name}: {error}"
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True,
                                    structured_content={"status": status, "error": error})


def build_server(env: EmulatedEnvironment) -> Server:
    async def list_tools(ctx, params) -> types.ListToolsResult:
        return types.ListToolsResult(tools=env.listing())

    lock = anyio.Lock()  # the calls of one step arrive together; one LLMClient answers one call at a time (its arun
    # is not re-entrant). The emulator has no history, so the order they are answered in changes no answer.

    async def call_tool(ctx, params: types.CallToolRequestParams) -> types.CallToolResult:
        async with lock:
            return await env.call(params.name, params.arguments)

    return Server("lpsbench-emulated", on_list_tools=list_tools, on_call_tool=call_tool)


async def serve(env: EmulatedEnvironment) -> None:
    server = build_server(env)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m aura.families.lpsbench.tool_server <episode spec file>", file=sys.stderr)
        return 2
    try:
        spec, config = load_spec(argv[0])
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    with LLMClient(config, accounting=StreamedAccounting(spec.emulator_calls)) as client:
        anyio.run(serve, EmulatedEnvironment(spec, client))
    return 0


if __name__ == "__main__":
    from aura.quick_exit import skip_final_collections

    skip_final_collections()
    sys.exit(main())
