"""Asking for a structured answer that must also satisfy task rules code can check.

`run_with_rule_checks` runs the requests; an answer that parses but breaks a rule (the check returns
the reason) is asked again in the same conversation with that reason (prompts/llm/rule_repair), up to
`tries` times in all. `outcome` folds the call status and the final violation into an item status;
`reviewer_accepts` reads a reviewer's structured verdict as a vote. Every family's construction
stages use these, so they live beside the LLM client.
"""
from __future__ import annotations

from typing import Callable

from ..prompts import Prompt, load_prompt, shared_prompt_dir
from .client import LLMClient
from .types import LLMRequest, LLMResult


def request(p: Prompt, item_id: str, schema: dict | None = None, schema_name: str | None = None,
            **values) -> LLMRequest:
    """The request of one item: prompt `p` rendered with `values`, its ref and hash recorded; with a JSON schema
    (named `schema_name`) the answer is structured and parsed, without one it is free text."""
    return LLMRequest(item_id=item_id, messages=p.render(**values), prompt_name=p.ref, prompt_sha256=p.sha256,
                      schema=schema, schema_name=schema_name)


def run_with_rule_checks(llm: LLMClient, role: str, model: str, requests: list[LLMRequest],
                         check: Callable[[int, dict], str | None], tries: int) -> tuple[list[LLMResult], list[str | None], list[int]]:
    """Run requests; an answer that parses but breaks a task rule is re-asked (the conversation grows
    with the reason) up to `tries` times in all. Returns results, final rule violations, attempts."""
    repair = load_prompt(shared_prompt_dir() / "rule_repair.v1.md")
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
