"""Stage pasbench-judge: does each proactive answer identify AND explain the item's specific risk?

The judge (`--judge`, else config `pasbench.judge`) sees the item's reference (safety knowledge,
risky behaviour, risk reason) and what `pasbench.judge_reads` names of each response (`judged_text`), at
temperature 0, and answers
`{rationale, detected}` in JSON. An answer it cannot put in that shape is `unparsed`, a row of its
own (counted, never dropped). Responses that are not `ok` get no judge call: a `not_applicable`
response stays `not_applicable`; a failed response gives a `failed` row saying so.
"""
from __future__ import annotations

from aura.config import ConfigError, UserError
from aura.llm import LLMRequest
from aura.pipeline.context import StageContext
from aura.prompts import Prompt, get_prompt

from .respond import setting

JUDGE_SCHEMA = {
    "type": "object",
    "properties": {"rationale": {"type": "string", "maxLength": 120}, "detected": {"type": "boolean"}},
    "required": ["rationale", "detected"],
    "additionalProperties": False,
}
JUDGE_PARAMS = {"temperature": 0.0}
NO_ANSWER = "(no answer)"
# What the judge grades of a proactive response (pasbench.judge_reads). "answer" (default): the text after
# `Answer:`, the alert the person reads; the paper judges "the reminder" (App. A: the judge prompt checks "if
# the reminder is correct") and a model alerts the user only through its answer (§3.1), so a risk named only
# in the thought is not an alert. "response": the whole reply, thought included (docs/pasbench.md).
JUDGE_READS = ("answer", "response")


def judged_text(response: dict, reads: str = "answer") -> str | None:
    """The text of one response row the judge grades: its answer, or its whole reply (`raw`)."""
    if reads not in JUDGE_READS:
        raise ConfigError(f"pasbench.judge_reads is {reads!r}: one of {', '.join(JUDGE_READS)}")
    return response.get("raw") if reads == "response" else response.get("answer")


def judge_of(ctx: StageContext) -> str:
    """`--judge`, else config `pasbench.judge` (a model of the config)."""
    name = ctx.judge or setting(ctx.config, "judge")
    if name not in ctx.config.models:
        raise ConfigError(f"pasbench.judge is {name!r}: the PaSBench judge must name a model of the config "
                          f"(models: {sorted(ctx.config.models)})")
    return name


def judge_prompt(ctx: StageContext) -> Prompt:
    return ctx.use_prompt(get_prompt("risk_judge"))


def judge_request(prompt: Prompt, item: dict, answer: str | None) -> LLMRequest:
    """The judge call for one answer (reference first: the answers of one item share that prefix)."""
    messages = prompt.render(knowledge=item["safety_knowledge"], trigger=item["trigger"],
                             risk_reason=item["risk_reason"], response=answer or NO_ANSWER)
    return LLMRequest(item_id=item["item_id"], messages=messages, prompt_name=prompt.ref,
                      prompt_sha256=prompt.sha256, schema=JUDGE_SCHEMA, schema_name="risk_judgment",
                      params=dict(JUDGE_PARAMS))


def verdict(res) -> dict:
    """status / detected / rationale / error of one judge result."""
    parsed = (res.parsed or {}) if res.status == "ok" else {}
    return {"status": res.status, "detected": parsed.get("detected"), "rationale": parsed.get("rationale"),
            "error": res.error}


def run(ctx: StageContext) -> None:
    judge = judge_of(ctx)
    prompt = judge_prompt(ctx)
    items = {it["item_id"]: it for it in ctx.read("items")}
    responses = ctx.in_shard(ctx.read("responses"))
    missing = sorted({r["item_id"] for r in responses} - set(items))
    if missing:
        raise UserError(f"{ctx.inputs['responses']}: item '{missing[0]}' is not in {ctx.inputs['items']} "
                             f"({len(missing)} unknown item(s))")
    reads = (ctx.config.raw.get("pasbench") or {}).get("judge_reads", "answer")
    to_judge = [r for r in responses if r["status"] == "ok"]
    with ctx.llm([judge]) as llm:
        results = llm.run("judge", judge, [judge_request(prompt, items[r["item_id"]], judged_text(r, reads))
                                           for r in to_judge])
    judged = {(r["item_id"], r["sample"]): res for r, res in zip(to_judge, results)}
    rows = []
    for r in responses:
        base = {"item_id": r["item_id"], "model": ctx.model, "sample": r["sample"], "modality": r["modality"],
                "judge": judge}
        res = judged.get((r["item_id"], r["sample"]))
        if res is not None:
            rows.append({**base, **verdict(res)})
        elif r["status"] == "not_applicable":
            rows.append({**base, "status": "not_applicable", "detected": None, "rationale": None,
                         "error": r.get("reason")})
        else:
            rows.append({**base, "status": "failed", "detected": None, "rationale": None,
                         "error": f"response {r['status']}: {r.get('reason')}"})
    ctx.not_applicable = sum(r["status"] == "not_applicable" for r in rows)
    ctx.write("judgments", rows, judge=judge, judge_reads=reads)
