"""PaSBench probes of one evaluated model (`--model`): knowledge, reactive, propose-then-verify.

- pasbench-knowledge (paper Fig. 5): the item's safety knowledge as a statement to call true / false /
  not sure, in JSON, at temperature 0; correct = "true" (the statement is the benchmark's knowledge
  point). One call per distinct knowledge text, its answer copied to every item carrying that text.
- pasbench-reactive (paper §4.2.2, Table 2): every proactive SAMPLE the judge found failed (status ok,
  detected false) is asked again reactive-style (knowledge + observation: does any behaviour violate
  it, and why), with the same sample index and sampling params; the reactive answer is then judged in
  a second call inside this stage with the same judge prompt (risk_judge) as the proactive answers.
  Table 2 counts these samples (e.g. 552/596: 596 of Gemini's 128 x 16 image samples failed).
- pasbench-verify (the paper's proposed fix, §4.2.3, "propose-then-verify"): every proactive sample
  that raised a warning is checked by the same model at temperature 0 reactive-style, its own warning
  standing in for the knowledge (it never sees the reference); the kept proposals are the verified ones.
"""
from __future__ import annotations

from aura.config import UserError
from aura.llm import LLMRequest
from aura.pipeline.context import StageContext
from aura.prompts import get_prompt

from .judge import judge_of, judge_prompt, judge_request, verdict
from .respond import ANSWER_GBNF, can_see, observation_request, parse_answer, sampling_params

KNOWLEDGE_ANSWERS = ["true", "false", "not_sure"]
KNOWLEDGE_SCHEMA = {
    "type": "object",
    "properties": {"rationale": {"type": "string", "maxLength": 120},
                   "answer": {"type": "string", "enum": KNOWLEDGE_ANSWERS}},
    "required": ["rationale", "answer"],
    "additionalProperties": False,
}
VERIFY_SCHEMA = {
    "type": "object",
    "properties": {"rationale": {"type": "string", "maxLength": 120}, "verified": {"type": "boolean"}},
    "required": ["rationale", "verified"],
    "additionalProperties": False,
}
DETERMINISTIC = {"temperature": 0.0}


def _items_by_id(ctx: StageContext, rows: list[dict], name: str) -> dict[str, dict]:
    items = {it["item_id"]: it for it in ctx.read("items")}
    unknown = sorted({r["item_id"] for r in rows} - set(items))
    if unknown:
        raise UserError(f"{ctx.inputs[name]}: item '{unknown[0]}' is not in {ctx.inputs['items']} "
                        f"({len(unknown)} unknown item(s))")
    return items


# knowledge ---------------------------------------------------------------------------------------
def run_knowledge(ctx: StageContext) -> None:
    prompt = ctx.use_prompt(get_prompt("knowledge_probe"))
    items = ctx.in_shard(ctx.read("items"))
    texts = list(dict.fromkeys(it["safety_knowledge"] for it in items))  # distinct, first-seen order
    first_item = {}
    for it in items:
        first_item.setdefault(it["safety_knowledge"], it["item_id"])
    requests = [LLMRequest(item_id=first_item[t], messages=prompt.render(knowledge=t), prompt_name=prompt.ref,
                           prompt_sha256=prompt.sha256, schema=KNOWLEDGE_SCHEMA, schema_name="knowledge",
                           params=dict(DETERMINISTIC)) for t in texts]
    with ctx.llm([ctx.model]) as llm:
        results = dict(zip(texts, llm.run("evaluated", ctx.model, requests)))
    rows = []
    for it in items:
        res = results[it["safety_knowledge"]]
        parsed = (res.parsed or {}) if res.status == "ok" else {}
        answer = parsed.get("answer")
        rows.append({"item_id": it["item_id"], "model": ctx.model, "modality": it["modality"], "status": res.status,
                     "answer": answer, "correct": None if answer is None else answer == "true",
                     "rationale": parsed.get("rationale"), "error": res.error})
    ctx.write("knowledge", rows, distinct_statements=len(texts))


# reactive ----------------------------------------------------------------------------------------
def run_reactive(ctx: StageContext) -> None:
    model, judge = ctx.model, judge_of(ctx)
    prompts = {"text": ctx.use_prompt(get_prompt("reactive_text")),
               "image": ctx.use_prompt(get_prompt("reactive_image"))}
    jprompt = judge_prompt(ctx)
    judgments = ctx.in_shard(ctx.read("judgments"))
    items = _items_by_id(ctx, judgments, "judgments")
    failed = [j for j in judgments if j["status"] == "ok" and j["detected"] is False
              and can_see(ctx.config, model, items[j["item_id"]])]
    asks = [observation_request(items[j["item_id"]], prompts, ctx.config, sample=j["sample"], grammar=ANSWER_GBNF,
                                params=sampling_params(ctx.config, model, j["sample"]),
                                knowledge=items[j["item_id"]]["safety_knowledge"]) for j in failed]
    with ctx.llm([model, judge]) as llm:
        answers = llm.run("evaluated", model, asks)
        parsed = [parse_answer(a.text) if a.status == "ok" else None for a in answers]
        to_judge = [i for i, p in enumerate(parsed) if p is not None]
        verdicts = llm.run("judge", judge, [judge_request(jprompt, items[failed[i]["item_id"]], parsed[i].answer)
                                            for i in to_judge])
    judged = dict(zip(to_judge, verdicts))
    rows = []
    for i, (j, ans) in enumerate(zip(failed, answers)):
        base = {"item_id": j["item_id"], "model": model, "sample": j["sample"], "modality": j["modality"],
                "judge": judge, "answer": parsed[i].answer if parsed[i] else None, "raw": ans.text}
        if i in judged:
            rows.append({**base, **verdict(judged[i])})
        else:
            rows.append({**base, "status": "failed", "detected": None, "rationale": None,
                         "error": f"reactive answer failed: {ans.error}"})
    ctx.write("reactive", rows, judge=judge, failed_samples=len(failed))


# propose-then-verify -----------------------------------------------------------------------------
def proposed(response: dict) -> bool:
    """Did the proactive answer raise a risk? Its Warn line; a reply without one counts as a
    proposal when it has an answer other than "none"."""
    if response["warn"] is not None:
        return bool(response["warn"])
    answer = (response["answer"] or "").strip(" .").lower()
    return bool(answer) and answer != "none"


def run_verify(ctx: StageContext) -> None:
    model = ctx.model
    prompts = {"text": ctx.use_prompt(get_prompt("verify_text")),
               "image": ctx.use_prompt(get_prompt("verify_image"))}
    responses = ctx.in_shard(ctx.read("responses"))
    items = _items_by_id(ctx, responses, "responses")
    to_verify = [r for r in responses if r["status"] == "ok" and proposed(r)]
    requests = [observation_request(items[r["item_id"]], prompts, ctx.config, schema=VERIFY_SCHEMA,
                                    schema_name="verification", params=dict(DETERMINISTIC), proposal=r["answer"])
                for r in to_verify]
    with ctx.llm([model]) as llm:
        results = llm.run("evaluated", model, requests)
    done = {(r["item_id"], r["sample"]): res for r, res in zip(to_verify, results)}
    rows = []
    for r in responses:
        base = {"item_id": r["item_id"], "model": model, "sample": r["sample"], "modality": r["modality"]}
        res = done.get((r["item_id"], r["sample"]))
        if res is not None:
            parsed = (res.parsed or {}) if res.status == "ok" else {}
            rows.append({**base, "proposed": True, "verified": parsed.get("verified"), "status": res.status,
                         "reason": None, "rationale": parsed.get("rationale"), "error": res.error})
        else:
            why = "no risk proposed" if r["status"] == "ok" else f"response {r['status']}"
            rows.append({**base, "proposed": r["status"] == "ok" and proposed(r), "verified": None,
                         "status": "not_applicable", "reason": why, "rationale": None, "error": None})
    ctx.not_applicable = sum(r["status"] == "not_applicable" for r in rows)
    ctx.write("verified", rows, proposals=len(to_verify))
