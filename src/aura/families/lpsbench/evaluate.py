"""Stage ``lpsbench-evaluate``: the evaluator labels each episode safe / unsafe / execution_failed.

    python -m aura lpsbench-evaluate --configfile C --model M --option variant=raw|mitigated \
        --in cases=<cases.jsonl> --in episodes=<episodes/{variant}/{model}.jsonl> \
        --out evaluations=<evaluations/{variant}/{model}.jsonl>

The evaluator model (``lpsbench.evaluator``, temperature 0) reads the generic template of paper Fig. 20
(prompts/lpsbench/evaluator.v1.md): the risk category's context and the decision rules of its kind
(benign: safe execution; adversarial: safe refusal), the case's criterion, the task and the full execution
record rendered as text (:func:`render_record`: every step's message, every tool call with its arguments,
what it returned, the final answer, why the episode stopped). Structured output ``{rationale, label}``.

Row: ``case_id, model, variant, risk, benign, domain, evaluator, status, label, rationale, error``.
status ``ok`` (a label), ``unparsed`` (the answer never fit the schema: its own outcome, label null, kept
and counted), ``failed`` (the call failed; or the EPISODE failed, then nothing is sent and ``error`` says
why). ``not_applicable`` is not produced by this stage (kept in the contract for later use).
An episode whose case is not in the cases file is an error naming both files.
"""
from __future__ import annotations

import json

from aura.config import ConfigError
from aura.llm import LLMRequest
from aura.prompts import get_prompt

from .cases import RISKS
from .data import LpsDataError, section
from .episodes import variant_of

ROLE = "lps_evaluator"
LABELS = ("safe", "unsafe", "execution_failed")
SCHEMA = {"type": "object",
          "properties": {"rationale": {"type": "string", "maxLength": 300}, "label": {"enum": list(LABELS)}},
          "required": ["rationale", "label"], "additionalProperties": False}


def _args(arguments) -> str:
    return json.dumps(arguments, sort_keys=True, ensure_ascii=False) if arguments is not None else "(unreadable)"


def render_record(record: dict) -> str:
    """The execution record as text: steps, tool calls with arguments and results, final answer, stop."""
    lines = []
    for step in record["steps"]:
        n = step["index"] + 1
        if step.get("content"):
            lines.append(f"Step {n}, agent says: {step['content'].strip()}")
        results = step.get("tool_results") or []
        for r in results:
            args = _args(r["arguments"]) if r["arguments"] is not None else r["arguments_text"]
            lines.append(f"Step {n}, agent calls {r['name']}({args})")
            lines.append(f"  returned [{r['status']}]: {r['observation'].strip()}")
        if not results and step.get("status") != "ok":
            lines.append(f"Step {n}: the model call {step.get('status')}: {step.get('error')}")
    if record.get("final_answer") is not None:
        lines.append(f"Final message to the user: {record['final_answer'].strip() or '(empty)'}")
    lines.append(f"Episode ended: {record['stop_reason']} after {len(record['steps'])} step(s).")
    return "\n".join(lines)


def request_for(prompt, case: dict, episode: dict) -> LLMRequest:
    risk = RISKS[case["risk"]]
    messages = prompt.render(risk_kind=risk.kind, risk_title=risk.title, risk_definition=risk.definition,
                             criterion=case["body"]["evaluator"]["criterion"],
                             instruction=case["body"]["instruction"], record=render_record(episode["record"]))
    return LLMRequest(item_id=episode["case_id"], messages=messages, prompt_name=prompt.ref,
                      prompt_sha256=prompt.sha256, params={"temperature": 0.0}, schema=SCHEMA,
                      schema_name="evaluation")


def run(ctx) -> None:
    variant, model = variant_of(ctx), ctx.model
    if model is None:
        raise ConfigError("lpsbench-evaluate needs --model (the evaluated agent whose episodes it labels)")
    evaluator = section(ctx.config.raw).get("evaluator")
    if evaluator is None:
        raise ConfigError("config lacks lpsbench.evaluator (a model name): lpsbench-evaluate needs it")
    if evaluator not in ctx.config.models:
        raise ConfigError(f"lpsbench.evaluator '{evaluator}' is not a model of the config")
    prompt = ctx.use_prompt(get_prompt("evaluator"))
    cases = {r["case_id"]: r for r in ctx.read("cases")}
    episodes = ctx.read("episodes")
    for ep in episodes:
        if ep["case_id"] not in cases:
            raise LpsDataError(f"{ctx.inputs['episodes']}: case {ep['case_id']} is not in {ctx.inputs['cases']}")
        if (ep["model"], ep["variant"]) != (model, variant):
            raise LpsDataError(f"{ctx.inputs['episodes']}: case {ep['case_id']} is model {ep['model']} variant "
                               f"{ep['variant']}, this job is {model} {variant}")
    asked = [ep for ep in episodes if ep["status"] == "ok"]
    requests = [request_for(prompt, cases[ep["case_id"]], ep) for ep in asked]
    with ctx.llm([evaluator]) as llm:
        results = llm.run(ROLE, evaluator, requests) if requests else []
    answered = {ep["case_id"]: res for ep, res in zip(asked, results)}
    rows = []
    for ep in episodes:
        base = {k: ep[k] for k in ("case_id", "model", "variant", "risk", "benign", "domain")}
        base["evaluator"] = evaluator
        res = answered.get(ep["case_id"])
        if res is None:
            rows.append({**base, "status": "failed", "label": None, "rationale": None,
                         "error": f"episode failed ({ep['stop_reason']}): {ep.get('error')}; not evaluated"})
            continue
        parsed = res.parsed if res.status == "ok" and isinstance(res.parsed, dict) else {}
        rows.append({**base, "status": res.status, "label": parsed.get("label"),
                     "rationale": parsed.get("rationale"), "error": res.error})
    ctx.write("evaluations", rows, variant=variant, evaluator=evaluator)
