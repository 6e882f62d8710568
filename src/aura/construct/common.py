"""Pieces every construction stage shares: prompt loading, JSON step schemas, reviewer votes."""
from __future__ import annotations

from functools import lru_cache
from typing import Callable

import yaml

from ..llm import LLMClient, LLMRequest, LLMResult
from ..pipeline.layout import PROMPTS_DIR
from ..prompts import Prompt, get_prompt, load_prompt, prompt_path

RS = ["RS1", "RS2", "RS3", "RS4", "RS5", "RS6"]
SD = ["SD1", "SD2", "SD3", "SD4", "SD5"]
DIMENSIONS = RS + SD

STEP_SCHEMA = {
    "anyOf": [
        {"type": "object", "properties": {"role": {"enum": ["user", "environment"]}, "content": {"type": "string"}},
         "required": ["role", "content"], "additionalProperties": False},
        {"type": "object", "properties": {"role": {"const": "agent"}, "thought": {"type": ["string", "null"]},
                                          "action": {"type": ["string", "null"]}},
         "required": ["role", "thought", "action"], "additionalProperties": False},
    ]
}
STEPS_SCHEMA = {"type": "array", "items": STEP_SCHEMA, "minItems": 1}


def prompt(name: str) -> Prompt:
    """The construction prompt `name` in the version `aura.prompts.VERSIONS` selects."""
    return get_prompt(name)


@lru_cache(maxsize=None)
def dimension_specs() -> dict[str, dict]:
    return yaml.safe_load(prompt_path("dimensions").read_text())


def dimensions_text(codes: list[str] = DIMENSIONS) -> str:
    specs = dimension_specs()
    return "\n".join(f"{c} {specs[c]['name']}: {specs[c]['definition']} Direction: {specs[c]['direction']}"
                     for c in codes)


def request(p: Prompt, item_id: str, schema: dict, schema_name: str, **values) -> LLMRequest:
    return LLMRequest(item_id=item_id, messages=p.render(**values), prompt_name=p.ref, prompt_sha256=p.sha256,
                      schema=schema, schema_name=schema_name)


def run_with_rule_checks(llm: LLMClient, role: str, model: str, requests: list[LLMRequest],
                         check: Callable[[int, dict], str | None], tries: int) -> tuple[list[LLMResult], list[str | None], list[int]]:
    """Run requests; an answer that parses but breaks a task rule is re-asked (the conversation grows
    with the reason) up to `tries` times in all. Returns results, final rule violations, attempts."""
    repair = load_prompt(PROMPTS_DIR / "llm" / "rule_repair.v1.md")
    results = llm.run(role, model, requests)
    violations = [check(i, r.parsed) if r.status == "ok" else None for i, r in enumerate(results)]
    attempts = [1] * len(requests)
    conversations = [list(r.messages) for r in requests]
    for _ in range(tries - 1):
        redo = [i for i, v in enumerate(violations) if v is not None]
        if not redo:
            break
        again = []
        for i in redo:
            conversations[i] = conversations[i] + [{"role": "assistant", "content": results[i].text or ""},
                                                   *repair.render(error=violations[i])]
            req = requests[i]
            again.append(LLMRequest(item_id=req.item_id, messages=conversations[i], prompt_name=req.prompt_name,
                                    prompt_sha256=req.prompt_sha256, schema=req.schema, schema_name=req.schema_name))
        for i, res in zip(redo, llm.run(role, model, again, reasks=True)):
            results[i] = res
            attempts[i] += 1
            violations[i] = check(i, res.parsed) if res.status == "ok" else None
    return results, violations, attempts


def outcome(call_status: str, violation: str | None) -> str:
    """An item's status: the call's (failed / unparsed), else rejected when a code check failed, else ok."""
    if call_status != "ok":
        return call_status
    return "rejected" if violation else "ok"


def reviewer_accepts(parsed: dict | None, criteria: list[str]) -> bool | None:
    """A reviewer's vote: accept only when the verdict is accept and every criterion holds.
    None when the review is missing or unparsed (it then counts as no vote)."""
    if not parsed:
        return None
    return parsed.get("verdict") == "accept" and all(parsed.get(c) is True for c in criteria)


def vote(review_row: dict, criteria: list[str]) -> bool | None:
    """A stored review row (criteria + verdict, or unparsed) as a reviewer vote."""
    if not review_row.get("criteria"):
        return None
    return reviewer_accepts({**review_row["criteria"], "verdict": review_row["verdict"]}, criteria)


def majority_accept(votes: list[bool | None], panel_size: int = 3) -> bool:
    """Kept when a strict majority of the panel accepts; a missing vote never helps."""
    return sum(1 for v in votes if v is True) > panel_size // 2
