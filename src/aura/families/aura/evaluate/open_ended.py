"""Stage open-ended: the evaluated agent continues each prefix for up to K steps in an LM-emulated environment
(AURA future work, §8: "longer-horizon agent rollouts"; issue 13 part 6).

Step k (1..K) is the rollout stage's request on the trajectory so far: the same ReAct prompt
(`rollout_react`), parser and grammar, the prefix followed by the earlier continued steps. Step 1 is therefore
the very request the main rollout sends (the cache key holds no item id), so it costs nothing when the main
evaluation ran. After every step but the last, the emulator model answers the step's action as text:

- a tool call (``ToolName: {...}``, the shape the rollout prompt asks for) as the tool's output, an
  ``[ENVIRONMENT]`` step (`emulator_open_ended`);
- anything else, a message to the user, as the user's reply, a ``[USER]`` step (`user_open_ended`).

Why a text environment and not LPS-Bench's MCP tool server (aura.families.lpsbench.tool_server): AURA's
trajectories are R-Judge text records. Their tools have no declared schemas, an action is free text
(``TurnOff: {"ids": [...]}`` or a message to the user), and the observations the emulator must stay consistent
with are the prefix's own ``[ENVIRONMENT]`` lines, not calls made through a server. The MCP path needs tool specs
to list and validate, native or forced tool calls from the agent, and a history of calls made through it; none of
that exists here, and forcing it would change the agent's interface away from the paper's ReAct format. What is
shared with LPS-Bench is its design, not its loop: an emulator prompt in the same style (play the environment,
raw output only, stay consistent, never refuse or warn), every call through the cached LLM layer, and stop reasons
named the same way. The emulator is not told the reference risk rationale: the risk a continuation meets is the
one the prefix built, so NSP/SP counterparts stay comparable.

All episodes of a job advance in lockstep (every live episode's step k in one batch, then the replies), so a
job sends K agent batches and K-1 emulator batches. Every call is cached the moment it arrives: a rerun replays
them and sends nothing; a killed job's rerun pays only for the calls never answered.

Outputs: ``episodes`` (one record per item: every step's thought, action, raw answer, cache key and the reply
with its own cache key, stop reason, the whole transcript), and per step a judge-ready pair ``step_items`` /
``step_rollouts`` (item id ``<item>#s<k>``, the trajectory before the step as ``model_input``): the judge and
panel stages label them unchanged (action type and safety, as for action-only rollouts).
"""
from __future__ import annotations

import re
from typing import TYPE_CHECKING

from aura.config import ConfigError, family_section

from ..data.trajectory import render_steps

if TYPE_CHECKING:
    from aura.pipeline.context import StageContext

# The rules file calls `check` and `models` when Snakemake builds the DAG: the LLM layer (openai) is imported
# only by the functions that call a model.

AGENT_PROMPT = "rollout_react"
ENV_PROMPT, USER_PROMPT = "emulator_open_ended", "user_open_ended"
ROLE = "open_ended_emulator"
# A tool call as the rollout prompt asks for it: `ToolName: {"argument": "value"}` (or a JSON list)
TOOL_CALL = re.compile(r"^\s*[A-Za-z_][\w.\-]*\s*:\s*[\{\[]")
LEADING_TAG = re.compile(r"^\s*\[(ENVIRONMENT|USER)\]\s*")
NEXT_TAG = re.compile(r"\[(USER|ENVIRONMENT|AGENT_THOUGHT|AGENT_ACTION)\]")  # as aura.families.aura.evaluate.rollout.NEXT_TAG
STOP_REASONS = ("step_cap", "agent_unparsed", "agent_failed", "environment_failed")


def section(raw: dict) -> dict:
    return family_section(raw, "aura")["evaluate"]["open_ended"]


def models(raw: dict) -> list[str]:
    """The models continued: `aura.evaluate.open_ended.models`, or every evaluated model."""
    chosen = section(raw).get("models")
    return list(chosen) if chosen is not None else list(raw["aura"]["roles"]["evaluated"])


def check(raw: dict) -> list[str]:
    """Problems the schema cannot see (models by name), one line each; [] when the experiment is off."""
    oe = section(raw)
    if not oe.get("enabled"):
        return []
    problems = []
    if not oe.get("emulator"):
        problems.append("aura.evaluate.open_ended.emulator: a model is required when aura.evaluate.open_ended.enabled")
    elif oe["emulator"] not in raw["models"]:
        problems.append(f"aura.evaluate.open_ended.emulator: unknown model '{oe['emulator']}' (not under models:)")
    for m in oe.get("models") or []:
        if m not in raw["aura"]["roles"]["evaluated"]:
            problems.append(f"aura.evaluate.open_ended.models: '{m}' is not an evaluated model")
    return problems


def is_tool_call(action: str) -> bool:
    return bool(TOOL_CALL.match(action or ""))


def reply_text(text: str | None) -> str:
    """The emulator's answer as one step: a leading [ENVIRONMENT]/[USER] tag dropped, cut at the next tag."""
    body = LEADING_TAG.sub("", text or "", count=1)
    return NEXT_TAG.split(body, maxsplit=1)[0].strip() or "(no output)"


def step_id(item_id: str, k: int) -> str:
    return f"{item_id}#s{k}"


def continued(steps: list[dict]) -> list[dict]:
    """The continued steps as trajectory steps (aura.families.aura.data.trajectory shape): agent step, then its reply."""
    out = []
    for s in steps:
        if s["status"] != "ok":
            break
        out.append({"role": "agent", "thought": s["thought"], "action": s["action"]})
        if s.get("reply") and s["reply"]["status"] == "ok":
            out.append({"role": "environment" if s["reply"]["kind"] == "tool" else "user",
                        "content": s["reply"]["text"]})
    return out


def trajectory(prefix: str, steps: list[dict]) -> str:
    """The text the agent sees before its next step: the prefix, then the continued steps in the same tags."""
    more = render_steps(continued(steps))
    return f"{prefix}\n{more}" if prefix and more else (prefix or more)


class Episodes:
    """Every item's episode, advanced in lockstep through one LLM client."""

    def __init__(self, items: list[dict], model: str, emulator: str, max_steps: int, grammar: str | None):
        from aura.prompts import get_prompt

        self.items, self.model, self.emulator, self.max_steps, self.grammar = items, model, emulator, max_steps, grammar
        self.agent = get_prompt(AGENT_PROMPT)
        self.env, self.user = get_prompt(ENV_PROMPT), get_prompt(USER_PROMPT)
        self.state = [{"steps": [], "stop": None, "error": None} for _ in items]

    def prompts(self) -> list:
        return [self.agent, self.env, self.user]

    def run(self, llm) -> None:
        for k in range(1, self.max_steps + 1):
            live = [i for i, s in enumerate(self.state) if s["stop"] is None]
            if not live:
                break
            self._agent_step(llm, k, live)
            self._replies(llm, k, [i for i in live if self.state[i]["stop"] is None])

    def _before(self, i: int) -> str:
        return trajectory(self.items[i]["model_input"], self.state[i]["steps"])

    def _agent_step(self, llm, k: int, live: list[int]) -> None:
        """Step k of every live episode: the rollout stage's request (prompt, grammar, parser) on the trajectory
        so far, as if it were an item whose prefix ends there."""
        from .rollout import parse_react, requests_for

        asked = [{"item_id": step_id(self.items[i]["item_id"], k), "profile": self.items[i]["profile"],
                  "model_input": self._before(i)} for i in live]
        results = llm.run("evaluated", self.model, requests_for(asked, self.agent, self.grammar),
                          desc=f"open-ended:{self.model}:step{k}")
        for i, res in zip(live, results):
            thought, action = parse_react(res.text) if res.status == "ok" else (None, None)
            status = res.status if res.status != "ok" else ("ok" if action else "unparsed")
            self.state[i]["steps"].append({
                "step": k, "status": status, "thought": thought, "action": action, "raw": res.text,
                "error": res.error, "cache_key": res.calls[-1].key if res.calls else None, "reply": None})
            if status != "ok":
                self.state[i]["stop"] = "agent_failed" if status == "failed" else "agent_unparsed"
                self.state[i]["error"] = res.error
            elif k == self.max_steps:
                self.state[i]["stop"] = "step_cap"

    def _replies(self, llm, k: int, live: list[int]) -> None:
        if not live:
            return
        from aura.llm import LLMRequest

        reqs, kinds = [], []
        for i in live:
            action = self.state[i]["steps"][-1]["action"]
            kinds.append("tool" if is_tool_call(action) else "user")
            prompt = self.env if kinds[-1] == "tool" else self.user
            reqs.append(LLMRequest(item_id=f"{step_id(self.items[i]['item_id'], k)}:reply",
                                   messages=prompt.render(profile=self.items[i]["profile"] or "",
                                                          trajectory=self._before(i), action=action),
                                   prompt_name=prompt.ref, prompt_sha256=prompt.sha256))
        results = llm.run(ROLE, self.emulator, reqs, desc=f"open-ended:{self.emulator}:reply{k}")
        for i, kind, req, res in zip(live, kinds, reqs, results):
            step = self.state[i]["steps"][-1]
            step["reply"] = {"kind": kind, "status": res.status, "text": reply_text(res.text) if res.status == "ok"
                             else None, "raw": res.text, "error": res.error, "prompt": req.prompt_name,
                             "cache_key": res.calls[-1].key if res.calls else None}
            if res.status != "ok":
                self.state[i]["stop"], self.state[i]["error"] = "environment_failed", res.error or res.status

    # rows ------------------------------------------------------------------------------------------------
    def records(self) -> list[dict]:
        out = []
        for it, s in zip(self.items, self.state):
            status = {"agent_failed": "failed", "environment_failed": "failed", "agent_unparsed": "unparsed"}.get(
                s["stop"], "ok")
            out.append({"item_id": it["item_id"], "model": self.model, "emulator": self.emulator,
                        "pair_label": it.get("pair_label"), "dimension": it.get("dimension"),
                        "max_steps": self.max_steps, "status": status, "stop_reason": s["stop"], "error": s["error"],
                        "steps": s["steps"], "prompts": [p.ref for p in self.prompts()],
                        "transcript": trajectory(it["model_input"], s["steps"])})
        return out

    def step_rows(self) -> tuple[list[dict], list[dict]]:
        """(step items, step rollouts): what the judge stage reads, one pair per agent step."""
        items, rollouts = [], []
        for it, s in zip(self.items, self.state):
            for n, step in enumerate(s["steps"]):
                sid = step_id(it["item_id"], step["step"])
                items.append({"item_id": sid, "source_item": it["item_id"], "step": step["step"],
                              "profile": it["profile"], "model_input": trajectory(it["model_input"], s["steps"][:n]),
                              "rationale": it["rationale"], "pair_label": it.get("pair_label"),
                              "dimension": it.get("dimension")})
                rollouts.append({"item_id": sid, "source_item": it["item_id"], "step": step["step"],
                                 "model": self.model, "prompt_format": "react", "status": step["status"],
                                 "thought": step["thought"], "action": step["action"], "raw": step["raw"],
                                 "error": step["error"]})
        return items, rollouts


def sample(raw: dict, items: list[dict]) -> list[dict]:
    """Every dataset item, or a stratified draw of `sample_size` (the format-sample draw, seeded by `seed`)."""
    from .format_sample import stratified_sample

    size = section(raw).get("sample_size")
    if size is None or size >= len(items):
        return sorted(items, key=lambda it: it["item_id"])
    return stratified_sample(items, size, raw["seed"])


def run(ctx: StageContext) -> None:
    from .rollout import FORMATS

    raw = ctx.config.raw
    problems = check(raw)
    if problems:
        raise ConfigError("; ".join(problems))
    oe = section(raw)
    if not oe.get("emulator"):
        raise ConfigError("aura.evaluate.open_ended.emulator: a model is required to run open-ended rollouts")
    items = sample(raw, ctx.read("dataset"))
    eps = Episodes(items, ctx.model, oe["emulator"], oe["max_steps"], FORMATS["react"][2])
    for p in eps.prompts():
        ctx.use_prompt(p)
    with ctx.llm([ctx.model, oe["emulator"]]) as llm:
        eps.run(llm)
    step_items, step_rollouts = eps.step_rows()
    ctx.write("step_items", step_items)
    ctx.write("step_rollouts", step_rollouts)
    ctx.row_statuses.clear()  # the job summary counts episodes, not the step rows written beside them
    ctx.write("episodes", eps.records(), max_steps=oe["max_steps"], emulator=oe["emulator"])
