"""What the LLM layer adapts for a model instead of sending what it cannot take (the provider's rules, checked
when the config is read, are aura.provider_rules).

o1-mini (and o1-preview) refuse system messages and any `response_format`, so the client folds system messages
into the first user turn and puts the schema in the prompt for them.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..provider_rules import NO_SYSTEM_ROLE, PROVIDERS  # noqa: F401 - PROVIDERS re-exported: the names a config takes


@dataclass(frozen=True)
class Quirks:
    """What the layer adapts for a model instead of sending it: system messages folded into the first user
    turn (`system_role` False), a structured-output style other than the endpoint's."""
    system_role: bool = True
    structured_output: str | None = None


def quirks(provider: str | None, model_id: str) -> Quirks:
    """What the client adapts for this model (OPENAI_REASONING: o1-mini takes neither system messages nor
    structured outputs)."""
    if provider == "openai-reasoning" and NO_SYSTEM_ROLE.match(model_id):
        return Quirks(system_role=False, structured_output="none")
    return Quirks()


def fold_system(messages: list[dict]) -> list[dict]:
    """System/developer messages folded, in order, into the front of the first user message."""
    system = [m["content"] for m in messages if m.get("role") in ("system", "developer")]
    rest = [m for m in messages if m.get("role") not in ("system", "developer")]
    if not system:
        return messages
    head = "\n\n".join(c if isinstance(c, str) else "".join(p.get("text", "") for p in c) for c in system)
    for i, m in enumerate(rest):
        if m.get("role") == "user":
            content = m.get("content")
            merged = (f"{head}\n\n{content}" if isinstance(content, str)
                      else [{"type": "text", "text": head}, *(content or [])])
            return [*rest[:i], {**m, "content": merged}, *rest[i + 1:]]
    return [{"role": "user", "content": head}, *rest]
