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


def render_indexed(steps: list[dict]) -> str:
    """Numbered steps for construction prompts: `[i] [USER] ...`, `[i] [AGENT_THOUGHT] ... / [AGENT_ACTION] ...`."""
    lines = []
    for i, s in enumerate(steps):
        if s["role"] == "agent":
            lines.append(f"[{i}] {TAGS['thought']} {s.get('thought') or ''} / {TAGS['action']} {s.get('action') or ''}")
        else:
            lines.append(f"[{i}] {TAGS[s['role']]} {s.get('content') or ''}")
    return "\n".join(lines)


def agent_step_violation(original: list[dict], rewritten: list[dict]) -> str | None:
    """Why a rewrite breaks the frozen-agent rule, or None.

    Only [USER]/[ENVIRONMENT] content may change: same number of steps, same roles in the same
    order, and every agent thought and action identical character for character.
    """
    if len(rewritten) != len(original):
        return "step_count_changed"
    for a, b in zip(original, rewritten):
        if a["role"] != b.get("role"):
            return "step_role_changed"
        if a["role"] == "agent" and ((a.get("thought") or "") != (b.get("thought") or "")
                                     or (a.get("action") or "") != (b.get("action") or "")):
            return "agent_step_edited"
    if all(a.get("content") == b.get("content") for a, b in zip(original, rewritten) if a["role"] != "agent"):
        return "no_change"
    return None


def normalise_steps(raw: list) -> list[dict]:
    """Steps from a model answer in the record shape (unknown keys dropped)."""
    out = []
    for s in raw:
        if s.get("role") == "agent":
            out.append({"role": "agent", "thought": s.get("thought"), "action": s.get("action")})
        else:
            out.append({"role": s.get("role"), "content": s.get("content")})
    return out
