"""The agent loop of an LPS-Bench episode: any MCP tool server, the evaluated model, an execution record.

`run_episode(session, client, spec)` lists the tools of an MCP `ClientSession`, offers them to the
evaluated model as OpenAI `tools`, and loops: one model call (one *step*), then the tool calls it made are
executed through the MCP session *at the same time* and their results go back as `tool` messages in call
order. These are the semantics of the paper's framework, LangChain v1's ``create_agent`` (upstream's
``agent.py``): each pending call of the model's answer is a parallel task of its ToolNode, and a tool that
raises is not handled by ToolNode's default ``handle_tool_errors`` (only argument-validation errors are), so
the agent's run ends (``tool_raised``). tests/lpsbench/test_lpsbench_agent_langchain.py runs LangChain's own
agent and this loop on one scripted episode and compares them. It stops when

- the model answers without a tool call (``final_answer``),
- the step cap was reached (``step_cap``): with ``step_unit: model_calls`` (the default), ``max_steps``
  model calls were made and the last one still called tools; with ``step_unit: tool_calls`` (upstream's
  runner counts tool calls), a step whose calls would take the count past ``max_steps``: none of them runs
  (upstream's runner raises on the model's answer, before its tool node),
- the agent's calls used ``max_episode_tokens`` prompt + completion tokens or more (``token_cap``; checked
  after each step, whose tool calls are carried out first),
- the model call failed (``model_failed``) or the tool environment did (``tool_failed``): the emulator failed,
  or a tool call ran past ``tool_call_timeout_s`` or past what is left of the episode's ``tool_time_limit_s``
  (the call is abandoned; the server process is killed when the session closes),
- a tool raised (``tool_raised``: upstream back-end; the calls of the step that answered are kept, the raising
  one gets no tool message; the episode's status is failed, as upstream's run is ``success: false``),
- the tool server died, or its connection broke, during a call (``server_died``: an infrastructure failure, not
  the agent's outcome; the record keeps every step so far and the episodes stage tries the episode again).

Every step keeps what was added to the conversation for its request, the cache key of the request,
the answer (text and tool calls), tokens, and each tool call's result. Every model call and every
emulator call goes through the LLM layer's cache, so rerunning a killed episode replays the finished
steps from the cache (the tool server gets the same calls in the same order, so its emulator requests
are the same too) and only the steps never answered reach an endpoint.

Tool calling (`AgentSettings.tool_calling`, from the endpoint's `tool_calling`):

- ``native``: the case's tools are offered as they are and the model picks among them (or answers).
- ``single_act_tool``: one function, ``act``, is offered and forced by a named ``tool_choice``. Its
  arguments are ``{"tool": <one of the case's tools>, "arguments": {...}}`` or ``{"tool": "finish",
  "answer": "..."}`` (a JSON-schema ``anyOf`` with one branch per tool, each carrying that tool's own
  parameters). llama.cpp turns a named tool_choice into a grammar of that schema, so a small local model
  that never calls tools on its own still takes real steps. The chosen tool is then called through MCP
  exactly as in native mode; the loop, the record and the tool server are the same.
- ``act_json``: the same `act` arguments, asked for as structured JSON output (the request's schema is the act
  function's parameters; no tools are sent), and the answer is made into the act call in code. For servers
  that ignore a named tool_choice when the model's chat template has no tools (llama.cpp's llama-server with
  SmolLM2). An answer that is not valid act JSON still becomes the act call, so the agent is told what was
  wrong with it (``bad_arguments``), as in single_act_tool mode.

`run_case(spec, spec_path, client)` runs an episode against the LM-emulated tool server started as a
subprocess (``python -m aura.families.lpsbench.tool_server``), or, with ``spec.tools.backend == "upstream"``,
against upstream's mock-tool module of the case in its own subprocess server (upstream_tools.py). One
LLMClient runs one episode at a time (its `arun` is not re-entrant).

    python -m aura.families.lpsbench.agent <episode spec file> <record.json>
"""
from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import Any, Literal

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED
from pydantic import BaseModel, Field

from aura.config import REPO_ROOT, UserError
from aura.io import atomic_write_json
from aura.llm import LLMClient, LLMRequest
from aura.llm.errors import StageFailed
from aura.llm.tool_calls import assistant_message, openai_tool, parse_arguments, tool_message
from aura.prompts import get_prompt

from .spec import EpisodeSpec, load_spec

ROLE = "lps_agent"
ACT, FINISH = "act", "finish"
ACT_STRING_CHARS, ACT_ANSWER_CHARS = 80, 240  # act mode: longest argument string, longest final answer
StopReason = Literal["final_answer", "step_cap", "token_cap", "model_failed", "tool_failed", "server_died",
                     "tool_raised"]
FAILED_STOPS = ("model_failed", "tool_failed", "server_died", "tool_raised")  # the episode's status is then failed
# What a call raises when the tool server's process is gone or its pipes broke (MCPError: Connection closed)
SERVER_GONE = (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream, ConnectionError)


class ToolResult(BaseModel):
    call_id: str
    name: str
    arguments: dict[str, Any] | None  # None when the model's arguments were not a JSON object
    arguments_text: str
    # error: the tool said so (or ToolNode's message: unknown tool, arguments its schema refuses); failed: the
    # environment; raised: the tool raised, which LangChain's ToolNode does not handle by default: the run ends
    status: Literal["ok", "error", "bad_arguments", "failed", "raised"]
    observation: str  # what the agent was given back


class Step(BaseModel):
    index: int
    new_messages: list[dict]  # the messages this step's request added to the conversation
    cache_key: str | None  # the call's answer in the cache (whether this run found it there is a fact of the
    # run, not of the episode: it goes to the job's calls log, so a rebuild from the cache writes this record again)
    status: str  # the LLM result's status
    error: str | None = None
    finish_reason: str | None = None
    tokens_in: int = 0
    tokens_out: int = 0
    content: str | None = None
    tool_calls: list[dict] = Field(default_factory=list)
    tool_results: list[ToolResult] = Field(default_factory=list)


class Episode(BaseModel):
    """The execution record of one episode (what the evaluator will read)."""

    case_id: str
    risk: str
    domain: str
    model: str
    emulator: str | None  # None: the upstream back-end (no emulator)
    sample: int
    status: Literal["ok", "failed"]  # failed: the model or the environment failed, not the agent's choice
    stop_reason: StopReason
    error: str | None = None
    steps: list[Step]
    tokens_in: int
    tokens_out: int
    tools: list[dict]  # the OpenAI tools offered (single_act_tool: the one `act` function)
    tool_calling: Literal["native", "single_act_tool", "act_json"] = "native"
    messages: list[dict]  # the whole conversation at the end
    final_answer: str | None = None
    prompt: str  # name.vN of the agent's system prompt
    prompt_sha256: str
    # Who answered the tools: {"backend": "emulated"} or, for upstream modules, the module (relative to the
    # checkout), its sha256, the configured interpreter (null: the pipeline's own), the network isolation used
    # ("unshare -rn" or "socket_guard") and the time limits. No path of the clone or the run.
    environment: dict[str, Any] | None = None


def mcp_tools_to_openai(tools) -> list[dict]:
    """MCP `Tool`s (name, description, inputSchema) as OpenAI function tools, in listing order."""
    return [openai_tool(t.name, t.description, t.input_schema) for t in tools]


class ServerDied(Exception):
    """The tool server died (or its connection broke) during a call; `result` is that call's failed result."""

    def __init__(self, result: ToolResult):
        super().__init__(result.observation)
        self.result = result


def _observation(result) -> str:
    texts = [c.text for c in result.content if getattr(c, "type", None) == "text"]
    other = [c.type for c in result.content if getattr(c, "type", None) != "text"]
    return "\n".join(texts + [f"[{kind} content]" for kind in other])


def capped(schema, chars: int):
    """A copy of a JSON schema whose strings without a maxLength get `chars`. Only the act function's schema
    is capped (the grammar then bounds each string): a small model otherwise writes one string until
    max_tokens and the call's JSON is cut. The tool server still checks the tool's own schema."""
    if isinstance(schema, list):
        return [capped(s, chars) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: capped(v, chars) for k, v in schema.items()}
    if schema.get("type") == "string" and "maxLength" not in schema and "enum" not in schema:
        out["maxLength"] = chars
    return out


def act_tool(tools: list[dict]) -> dict:
    """The single `act` function over the case's OpenAI tools: pick a tool and its arguments, or finish."""
    names = [t["function"]["name"] for t in tools]
    if FINISH in names:
        raise ValueError(f"a case tool is named '{FINISH}', which single_act_tool mode keeps for the final answer")
    branches = [{"type": "object", "properties": {"tool": {"const": t["function"]["name"]},
                                                  "arguments": capped(t["function"]["parameters"], ACT_STRING_CHARS)},
                 "required": ["tool", "arguments"], "additionalProperties": False} for t in tools]
    branches.append({"type": "object", "properties": {"tool": {"const": FINISH},
                                                      "answer": {"type": "string", "maxLength": ACT_ANSWER_CHARS}},
                     "required": ["tool", "answer"], "additionalProperties": False})
    return openai_tool(ACT, act_guide(tools), {"type": "object", "anyOf": branches})


def act_guide(tools: list[dict]) -> str:
    """How to use `act`, with each tool's name, description and parameters. It is the act function's
    description and, in single_act_tool mode, is also added to the system message: a server that turns a
    named tool_choice into a grammar (llama.cpp) does not show the tools to the model."""
    listing = "\n".join(f"- {t['function']['name']}: {t['function']['description']} parameters: "
                        f"{json.dumps(t['function']['parameters'].get('properties', {}), sort_keys=True)}"
                        for t in tools)
    return ("Take each step through the act function. Either call one tool: set `tool` to its name and "
            f"`arguments` to its arguments; or, when the task is done or you will not go on, set `tool` to "
            f"\"{FINISH}\" and `answer` to your final message to the user. Tools:\n{listing}")


def _route(call: dict, native: bool) -> tuple[str, str, dict | None, str | None]:
    """(tool name, arguments text, arguments, problem) of a call; in act mode the chosen tool's."""
    fn = call.get("function") or {}
    name, text = fn.get("name", ""), fn.get("arguments") or ""
    arguments, reason = parse_arguments(call)
    if native or reason is not None:
        return name, text, arguments, reason
    if name != ACT:
        return name, text, None, f"unknown function '{name}' (the only one is {ACT})"
    chosen = arguments.get("tool")
    if not isinstance(chosen, str) or not chosen:
        return name, text, None, "act needs a `tool` name"
    if chosen == FINISH:
        return FINISH, text, arguments, None
    inner = arguments.get("arguments", {})
    if not isinstance(inner, dict):
        return chosen, text, None, f"`arguments` of {chosen} must be a JSON object"
    return chosen, text, inner, None


def _assistant_turn(text: str | None, tool_calls: list[dict] | None, native: bool) -> dict:
    """The assistant turn appended after an answer. A tool-call turn without text gets a string content:
    llama-cpp-python's server refuses content null and chat templates that ignore `tool_calls` (SmolLM2's)
    read `content` only. In single_act_tool mode that content is the act call's arguments, so such a model
    still sees the steps it took; in native mode it is empty."""
    turn = assistant_message(text, tool_calls)
    if turn["content"] is None and tool_calls:
        turn["content"] = "" if native else "\n".join((c.get("function") or {}).get("arguments") or ""
                                                       for c in tool_calls)
    return turn


async def _execute(session: ClientSession, call: dict, native: bool = True,
                   limit: tuple[float, str] | None = None) -> ToolResult:
    """Carry out one call through MCP; `limit` = (seconds, what limit it is): past it the call is abandoned
    and the result is ``failed`` (the episode stops with tool_failed). A server that dies during the call raises
    ServerDied with the call's failed result."""
    name, text, arguments, reason = _route(call, native)
    if reason is not None:
        return ToolResult(call_id=call.get("id", ""), name=name, arguments=None, arguments_text=text,
                          status="bad_arguments", observation=f"Error: {reason}")
    try:
        with anyio.fail_after(limit[0] if limit else None):
            result = await session.call_tool(name, arguments)
    except TimeoutError:
        return ToolResult(call_id=call.get("id", ""), name=name, arguments=arguments, arguments_text=text,
                          status="failed", observation=f"tool server killed: {name} ran past {limit[1]}")
    except (MCPError, *SERVER_GONE) as exc:
        if isinstance(exc, MCPError) and exc.code != CONNECTION_CLOSED:
            raise
        why = " ".join(str(exc).split()) or "its connection closed"
        raise ServerDied(ToolResult(call_id=call.get("id", ""), name=name, arguments=arguments, arguments_text=text,
                                    status="failed", observation=f"tool server died: {name} got no answer "
                                                                 f"({type(exc).__name__}: {why})")) from None
    structured = result.structured_content or {}
    if structured.get("status") == "fatal":  # the emulator's endpoint refused (bad key, ...): the job stops
        raise StageFailed(f"tool environment for {name}: {structured.get('error') or 'failed'}")
    status = structured.get("status") if structured.get("status") in ("failed", "raised") else \
        ("error" if result.is_error else "ok")
    return ToolResult(call_id=call.get("id", ""), name=name, arguments=arguments, arguments_text=text,
                      status=status, observation=_observation(result))


async def run_episode(session: ClientSession, client: LLMClient, spec: EpisodeSpec) -> Episode:
    """Run one episode over an initialized MCP session (see the module docstring for the stop rules)."""
    settings, case = spec.settings, spec.case
    prompt = spec.agent_prompt()  # our prompt file, or upstream's text (lpsbench.texts: upstream; spec.py)
    native, as_json = settings.tool_calling == "native", settings.tool_calling == "act_json"
    tools = mcp_tools_to_openai((await session.list_tools()).tools)
    messages = prompt.render(instruction=case.instruction)
    tool_choice, schema = settings.tool_choice, None
    if not native:
        tools, guide = [act_tool(tools)], act_guide(tools)
        if as_json:
            schema = tools[0]["function"]["parameters"]
        else:
            tool_choice = tool_choice or {"type": "function", "function": {"name": ACT}}
        if messages and messages[0]["role"] == "system":
            messages[0] = {**messages[0], "content": f"{messages[0]['content']}\n\n{guide}"}
    steps: list[Step] = []
    tokens_in = tokens_out = 0
    sent = 0  # messages already part of an earlier request
    stop: StopReason | None = None
    error = final = None
    tool_seconds = 0.0  # time spent in tool calls so far (tool_time_limit_s)
    by_tools = settings.step_unit == "tool_calls"
    calls_made = 0  # tool calls run so far (step_unit tool_calls)
    # by tool calls, every step but the last makes one or more calls: at most max_steps + 1 model calls
    for index in range(settings.max_steps + 1 if by_tools else settings.max_steps):
        req = LLMRequest(item_id=f"{case.case_id}:s{spec.sample}:step{index}", messages=list(messages),
                         prompt_name=prompt.ref, prompt_sha256=prompt.sha256, sample_index=spec.sample,
                         params=dict(settings.params) or None, tools=None if as_json else tools,
                         tool_choice=tool_choice, schema=schema, schema_name=ACT)
        [res] = await client.arun(ROLE, spec.agent_model, [req], desc=f"{ROLE}:{case.case_id}:step{index}")
        if as_json:
            _as_act_call(res, index)
        rec = res.calls[-1] if res.calls else None
        step = Step(index=index, new_messages=messages[sent:], cache_key=rec.key if rec else None,
                    status=res.status, error=res.error,
                    finish_reason=res.finish_reason, tokens_in=sum(c.tokens_in for c in res.calls),
                    tokens_out=sum(c.tokens_out for c in res.calls), content=res.text,
                    tool_calls=res.tool_calls or [])
        steps.append(step)
        sent = len(messages)
        tokens_in, tokens_out = tokens_in + step.tokens_in, tokens_out + step.tokens_out
        if res.status != "ok":
            stop, error = "model_failed", res.error or res.status
            break
        messages.append(_assistant_turn(res.text, res.tool_calls, native))
        if not res.tool_calls:
            stop, final = "final_answer", res.text
            break
        if not native and len(res.tool_calls) == 1 and _route(res.tool_calls[0], native)[0] == FINISH:
            answer = _route(res.tool_calls[0], native)[2].get("answer")
            stop, final = "final_answer", answer if isinstance(answer, str) else ""
            break
        calls = res.tool_calls
        if by_tools and calls_made + len(calls) > settings.max_steps:  # upstream's runner stops before the step
            stop = "step_cap"  # runs: none of its calls is carried out
            break
        calls_made += len(calls)
        started = time.monotonic()
        results, died = await _execute_step(session, calls, native, _limit(settings, tool_seconds))
        tool_seconds += time.monotonic() - started
        step.tool_results.extend(results)
        # in call order, as ToolNode's tasks write them; a call that raised has no tool message (the run ended)
        messages.extend(tool_message(r.call_id, r.observation) for r in results if r.status != "raised")
        failed = [r for r in results if r.status in ("failed", "raised")]
        if died:
            stop, error = "server_died", failed[0].observation
        elif failed:
            raised = [r for r in failed if r.status == "raised"]
            stop, error = ("tool_raised", raised[0].observation) if raised else ("tool_failed", failed[0].observation)
        if stop is not None:
            break
        if settings.max_episode_tokens is not None and tokens_in + tokens_out >= settings.max_episode_tokens:
            stop = "token_cap"
            break
    else:
        stop = "step_cap"
    return Episode(case_id=case.case_id, risk=case.risk, domain=case.domain, model=spec.agent_model,
                   emulator=spec.emulator_model, sample=spec.sample,
                   status="failed" if stop in FAILED_STOPS else "ok", stop_reason=stop,
                   error=error, steps=steps, tokens_in=tokens_in, tokens_out=tokens_out, tools=tools,
                   messages=messages, final_answer=final, prompt=prompt.ref, prompt_sha256=prompt.sha256,
                   tool_calling=settings.tool_calling)


def _as_act_call(res, index: int) -> None:
    """act_json: the answer's JSON becomes the act call (its arguments text as the model wrote it). An answer
    that does not parse is an act call all the same: routing it tells the agent what is wrong (bad_arguments)."""
    if res.status in ("ok", "unparsed") and res.text is not None:
        res.tool_calls = [{"id": f"act-{index}", "type": "function",
                           "function": {"name": ACT, "arguments": res.text}}]
        res.status, res.text, res.parsed = "ok", None, None


async def _execute_step(session: ClientSession, calls: list[dict], native: bool,
                        limit: tuple[float, str] | None) -> tuple[list[ToolResult], bool]:
    """Carry out the calls of one step at the same time (LangChain v1's create_agent sends each pending call of
    the model's answer to its ToolNode as a parallel task); (results in call order, whether the server died)."""
    results: list[ToolResult | None] = [None] * len(calls)
    died, raised = False, []

    async def one(i: int, call: dict) -> None:
        nonlocal died
        try:
            results[i] = await _execute(session, call, native, limit)
        except ServerDied as exc:
            results[i], died = exc.result, True
        except Exception as exc:  # noqa: BLE001 - re-raised as itself below (StageFailed...), not as a group
            raised.append(exc)

    async with anyio.create_task_group() as tg:
        for i, call in enumerate(calls):
            tg.start_soon(one, i, call)
    if raised:
        raise raised[0]
    return results, died


def _limit(settings, used: float) -> tuple[float, str] | None:
    """The time the next tool call may take, and which limit that is (None: no limit)."""
    limits = []
    if settings.tool_call_timeout_s is not None:
        limits.append((settings.tool_call_timeout_s, f"the per-call limit of {settings.tool_call_timeout_s:g} s"))
    if settings.tool_time_limit_s is not None:
        limits.append((max(settings.tool_time_limit_s - used, 0.001),
                       f"the episode's tool time limit of {settings.tool_time_limit_s:g} s"))
    return min(limits, key=lambda x: x[0]) if limits else None


EMULATED_SERVER = "aura.families.lpsbench.tool_server"


def emulated_env() -> dict:
    """The emulated tool server's environment: the job's (the emulator's endpoint may need an API key
    variable), the package on its path."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT / "src"), env.get("PYTHONPATH")) if p)
    return env


def tool_server_params(spec_path: str | Path) -> StdioServerParameters:
    """How to start the emulated tool server for a spec file (this interpreter, the package on its path)."""
    env = emulated_env()
    from .fork_server import launch_command

    # the job's fork server when it runs one (episodes.run), else a fresh interpreter
    cmd = launch_command((sys.executable, "emulated"), EMULATED_SERVER, [str(spec_path)]) or \
        [sys.executable, "-m", EMULATED_SERVER, str(spec_path)]
    return StdioServerParameters(command=cmd[0], args=cmd[1:], env=env)


async def run_case(spec: EpisodeSpec, spec_path: str | Path, client: LLMClient, write: bool = True) -> Episode:
    """Write the spec (unless it is already there), start the emulated tool server on it, run the
    episode, stop the server. An episode that ran is returned whatever closing its server's session raises (a
    server that died mid-episode: ``server_died``, the record so far)."""
    if write:
        spec.write(spec_path)
    if spec.tools.backend == "upstream":
        from .upstream_tools import run_upstream_case  # launches a subprocess; imports no tool code

        return await run_upstream_case(spec, client, run_episode)
    episode = None
    try:
        # errlog given now: stdio_client's default is the sys.stderr of the moment mcp was imported, which may be
        # closed since (a stream replaced for a while), and the server's stderr belongs in this job's log
        async with stdio_client(tool_server_params(spec_path), errlog=sys.stderr) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                episode = await run_episode(session, client, spec)
    except Exception:
        if episode is None:
            raise
    episode.environment = {"backend": "emulated"}
    return episode


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2:
        print("usage: python -m aura.families.lpsbench.agent <episode spec file> <record.json>", file=sys.stderr)
        return 2
    try:
        spec, config = load_spec(argv[0])
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    with LLMClient(config) as client:
        episode = asyncio.run(run_case(spec, argv[0], client, write=False))
    atomic_write_json(argv[1], episode.model_dump(mode="json"))
    print(f"{episode.case_id}: {episode.stop_reason} after {len(episode.steps)} steps, "
          f"{episode.tokens_in}+{episode.tokens_out} tokens", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
