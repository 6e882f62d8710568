"""Trajectory steps as plain dicts, and their rendering into the model-facing text format."""
from __future__ import annotations

from .rjudge import AgentMsg, EnvMsg, RJudgeRecord, UserMsg

TAGS = {"user": "[USER]", "thought": "[AGENT_THOUGHT]", "action": "[AGENT_ACTION]", "environment": "[ENVIRONMENT]"}


def steps_of(record: RJudgeRecord) -> list[dict]:
    """Flatten R-Judge turns into steps: {"role": user|environment, "content"} or {"role": agent, "thought", "action"}."""
    steps: list[dict] = []
    for turn in record.contents:
        for msg in turn:
            if isinstance(msg, AgentMsg):
                steps.append({"role": "agent", "thought": msg.thought, "action": msg.action})
            elif isinstance(msg, (UserMsg, EnvMsg)):
                steps.append({"role": msg.role, "content": msg.content})
    return steps


def render_steps(steps: list[dict]) -> str:
    """The text the evaluated model sees: one tagged line block per field, empty fields omitted."""
    lines: list[str] = []
    for s in steps:
        if s["role"] == "agent":
            if s.get("thought"):
                lines.append(f"{TAGS['thought']} {s['thought']}")
            if s.get("action"):
                lines.append(f"{TAGS['action']} {s['action']}")
        elif s.get("content"):
            lines.append(f"{TAGS[s['role']]} {s['content']}")
    return "\n".join(lines)


def user_instruction(steps: list[dict]) -> str:
    return next((s["content"] for s in steps if s["role"] == "user" and s.get("content")), "")
