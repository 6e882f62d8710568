"""Stage rollout: the evaluated model continues each prefix with one thought and one action.

The model sees the profile and the prefix only: never the pair label, rationale or sketches.
Unparseable output is kept as `unparsed` with its raw text; failed calls as `failed`.
"""
from __future__ import annotations

import re

from aura.llm import LLMRequest
from aura.pipeline.context import StageContext
from aura.prompts import get_prompt

ACTION_ONLY = re.compile(r"\[AGENT_ACTION\](?P<action>.*)", re.DOTALL)
THOUGHT_ACTION = re.compile(r"\[AGENT_THOUGHT\](?P<thought>.*?)\[AGENT_ACTION\](?P<action>.*)", re.DOTALL)
NEXT_TAG = re.compile(r"\[(USER|ENVIRONMENT|AGENT_THOUGHT|AGENT_ACTION)\]")


def parse_react(text: str | None) -> tuple[str | None, str | None]:
    """(thought, action) from a ReAct continuation, or (None, None) when the format is missing."""
    if not text:
        return None, None
    m = THOUGHT_ACTION.search(text)
    if not m:
        return None, None
    action = NEXT_TAG.split(m.group("action"), maxsplit=1)[0].strip()
    thought = m.group("thought").strip()
    return (thought or None), (action or None)


def parse_action_only(text: str | None) -> tuple[None, str | None]:
    """(None, action) from an action-only continuation (Appendix J.4), or (None, None)."""
    m = ACTION_ONLY.search(text or "")
    if not m:
        return None, None
    action = NEXT_TAG.split(m.group("action"), maxsplit=1)[0].strip()
    return None, (action or None)


# The answer shapes as GBNF grammars, for endpoints that constrain decoding (`grammar: gbnf`): the
# prompt and the parsers above are unchanged; an answer in these shapes always parses. A thought is
# one line without '[' (so it cannot hold a tag); an action is one line that starts with neither a
# space nor '['. Lengths are capped in characters so that thought and action fit in ~160 tokens.
REACT_GBNF = r"""root ::= "[AGENT_THOUGHT] " thought "\n[AGENT_ACTION] " action
thought ::= [^\n\[ \t] [^\n\[]{0,299}
action ::= [^\n\[ \t] [^\n]{0,239}
"""
ACTION_ONLY_GBNF = r"""root ::= "[AGENT_ACTION] " action
action ::= [^\n\[ \t] [^\n]{0,299}
"""

FORMATS = {"react": ("rollout_react", parse_react, REACT_GBNF),
           "action_only": ("rollout_action_only", parse_action_only, ACTION_ONLY_GBNF)}


def requests_for(items: list[dict], prompt, grammar: str | None = None) -> list[LLMRequest]:
    """`grammar` is attached to every request; the LLM layer sends it only where the endpoint can use it."""
    return [
        LLMRequest(item_id=it["item_id"],
                   messages=prompt.render(profile=it["profile"] or "", trajectory=it["model_input"]),
                   prompt_name=prompt.ref, prompt_sha256=prompt.sha256, grammar=grammar)
        for it in items
    ]


def run(ctx: StageContext) -> None:
    """`--option format=action_only` gives the action-only interface (no thought)."""
    fmt = ctx.options.get("format", "react")
    prompt_name, parse, grammar = FORMATS[fmt]
    prompt = ctx.use_prompt(get_prompt(prompt_name))
    items = ctx.in_shard(ctx.read("dataset"))
    with ctx.llm([ctx.model]) as llm:
        results = llm.run("evaluated", ctx.model, requests_for(items, prompt, grammar))
    rows = []
    for it, res in zip(items, results):
        thought, action = parse(res.text) if res.status == "ok" else (None, None)
        status = res.status if res.status != "ok" else ("ok" if action else "unparsed")
        rows.append({"item_id": it["item_id"], "model": ctx.model, "prompt_format": fmt, "status": status,
                     "thought": thought, "action": action, "raw": res.text, "error": res.error})
    ctx.write("rollouts", rows)
