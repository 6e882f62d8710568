"""LPS-Bench case generation (paper §3.2): per (domain, risk) slot an instruction designer, a tool developer
and a criteria formulator write the parts of a new case; code assembles and checks it; a person's review
file keeps or rejects each case, and a rejection's feedback goes into the next iteration's prompts.

Stages (config section ``lpsbench.generate``):

lpsbench-generate      The orchestrator (code) plans the slots: for each risk in ``risks``, ``per_risk``
                       slots whose domains are drawn from ``domains`` (seeded shuffle per risk, then in
                       turn, so the slots of one risk spread over the domains). A slot's case is numbered
                       from 9001 within its (domain, risk) (``code-EB_9001``), so it never collides with
                       upstream's cases (1..~11) when folders are merged. Per slot, three structured
                       steps, each with the risk category's template (``prompts/lpsbench/generate_templates``):
                       designer -> {scenario, instruction}; tool developer (sees scenario and instruction)
                       -> tool specs as data (name, description, typed parameter list, behaviour note for
                       the emulator; never code); criteria formulator (sees all of it) -> {criterion}.
                       An answer that breaks a check below is asked again with the reason (``rule_tries``
                       in all), then rejected with it. Code assembles the case JSON (``cases.CaseFile``:
                       the parameter list becomes a JSON schema of type object; ``evaluator.file/func`` are
                       upstream's per-risk names, ``MCP.file`` upstream's ``<domain>_<RISK>_<n>.py``, a
                       module that does not exist for a generated case: the emulator plays its tools).
                       Writes one draft row per slot and the exclusions with their reasons.
lpsbench-review-cases  Applies the person's review file (``review``): accepted drafts are written as
                       ``<cases>/<domain>/<RISK>_<n>.json`` (``cases.load_cases`` reads the folder back);
                       rejected ones are dropped and their feedback is written to ``--out feedback``.
                       Without a review file every draft that passed the checks is kept (``no_review``);
                       with one, a draft it does not list is left out (``not_reviewed``).

Next iteration: copy the feedback output out of the pipeline's folders (pointing the config at the output
itself would make the workflow a cycle) and set ``lpsbench.generate.feedback`` to the copy. The next
``lpsbench-generate`` puts each slot's feedback (every row for that case id, in file order: concatenated
files accumulate the iterations) into that slot's three prompts, so exactly those slots get new answers;
the other slots' prompts are unchanged and come back from the cache.

Checks (the first that fails names the reason):

empty_field      the scenario, instruction, a tool's description or behaviour, or a parameter's
                 description holds no letter.
tool_count       no tool, or more than ``max_tools`` (a guard: the answer's schema bounds the list).
tool_name        a tool name is not 1-64 letters, digits, '_' or '-' (what the function-calling API takes).
duplicate_tool   two tools share a name.
parameters       a parameter name is not an identifier, or is listed twice in one tool; the assembled
                 JSON schema fails ``jsonschema``'s schema check (a guard).
unknown_tool     the instruction or the criterion names a tool the case does not have. A "named tool"
                 is a lower_snake_case word after call/calls/calling/invoke/invokes/invoking (optionally
                 "the", optionally in backticks, not followed by '(', '/' or a '.' that starts a file
                 extension), or one followed by "tool", "tools", "api" or "API". Measured on upstream's
                 570 cases: 3 instructions and 0 criteria name a tool that is not in their list
                 (OS_operation/RC_9 ``verify_driver_signature``,
                 code/RC_6 ``check_availability``, multi_media/HS_4 ``ultra_pack_archiver``); 8 + 18
                 mentions name listed tools.
case_file        the assembled case fails ``cases.CaseFile`` or does not load back through
                 ``cases.parse_case`` (a guard: the checks above should make it unreachable).

Review file (CSV with columns ``case_id, verdict, feedback`` and optionally ``digest``, or JSONL objects
with those keys): ``verdict`` is ``accept`` or ``reject``; ``feedback`` is required for a rejection (it is
what the next iteration gets). ``digest`` (the draft row's ``digest``), when given, must match the draft:
a review written for an earlier iteration's draft of the same slot is refused, not applied to the new
one. Every problem in the file (missing file or column, bad verdict, empty feedback, unknown or repeated
case id, accepting a draft that failed its checks, a stale digest) is one line naming the file and row.
"""
from __future__ import annotations

import json
import random
import re
import shutil
from collections import Counter
from pathlib import Path

import jsonschema
from pydantic import ValidationError

from aura.config import UserError, family_section
from aura.io import canonical_json, read_person_table, sha256_text
from aura.llm.rule_checks import outcome, request, run_with_rule_checks
from aura.pipeline.context import StageContext
from aura.prompts import get_data_prompt, get_prompt
from aura.provenance import provenance, write_provenance

from .cases import DOMAINS, RISKS, TOOL_NAME, CaseError, CaseFile, case_id, parse_case

GENERATED_BASE = 9000
DEFAULTS = {"enabled": False, "generator": None, "per_risk": 1, "risks": list(RISKS), "domains": list(DOMAINS),
            "seed": 0, "feedback": None, "review": None, "rule_tries": 2, "max_tools": 6}
# Upstream's evaluator module and function per risk (the names every upstream case of that risk carries).
EVALUATOR = {"TS": ("task_sequence.py", "is_correct_task_sequence"), "OC": ("over_compliance.py", "is_over_compliance"),
             "FA": ("false_assumption.py", "is_false_assumption"), "IP": ("inefficient_plan.py", "is_inefficient_plan"),
             "HS": ("harmless_subtask.py", "is_harmful_intent_into_harmless_subtasks"),
             "MT": ("multiturn.py", "is_multiturn_attack"),
             "EB": ("environment_backdoor.py", "is_environment_backdoor"),
             "RC": ("race_condition.py", "is_race_condition"), "PI": ("prompt_injection.py", "is_prompt_injection")}
PARAM_TYPES = ["string", "integer", "number", "boolean", "array", "object"]
PARAM_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
LETTER = re.compile(r"[^\W\d_]")
IDENT = r"[a-z][a-z0-9]*(?:_[a-z0-9]+)+"
TOOL_MENTION = re.compile(rf"\b(?:call|calls|calling|invoke|invokes|invoking)\s+(?:the\s+)?`?({IDENT})\b`?(?!\.\w|[(/])"
                          rf"|`?\b({IDENT})\b`?\s+(?:tool|tools|api|API)\b")
# Length caps of the answers' strings. The instruction has none: llama.cpp refuses a grammar whose string
# repeats more than about 1000 times (checked: maxLength 1000 compiles, 1200 does not), and upstream's
# instructions run to ~2,600 characters; max_tokens bounds it.
LIMITS = {"scenario": 300, "tool_description": 200, "behaviour": 400, "param_description": 120, "criterion": 800,
          "params": 6}


class ReviewError(UserError):
    """A problem in the person-written review or feedback file (one line: file and row)."""


# settings, templates, slots --------------------------------------------------------------------------
def settings(raw: dict, generating: bool = True) -> dict:
    """``lpsbench.generate`` with the defaults of every key the config leaves out, checked (the generator
    model only when `generating`)."""
    cfg = {**DEFAULTS, **(family_section(raw, "lpsbench").get("generate") or {})}
    where = "config lpsbench.generate"
    if generating and not cfg["generator"]:
        raise UserError(f"{where}.generator: a model is required to generate cases")
    if generating and cfg["generator"] not in raw.get("models", {}):
        raise UserError(f"{where}.generator: unknown model '{cfg['generator']}' (not under models:)")
    for key in ("per_risk", "rule_tries", "max_tools"):
        if not isinstance(cfg[key], int) or isinstance(cfg[key], bool) or cfg[key] < 1:
            raise UserError(f"{where}.{key}: must be an integer >= 1, got {cfg[key]!r}")
    for key, known in (("risks", list(RISKS)), ("domains", list(DOMAINS))):
        bad = [v for v in cfg[key] or [] if v not in known]
        if not cfg[key] or bad or len(set(cfg[key])) != len(cfg[key]):
            raise UserError(f"{where}.{key}: a non-empty list without repeats of {', '.join(known)}; got {cfg[key]!r}")
    return cfg


def templates() -> tuple[dict, dict]:
    """(per-risk templates and domain descriptions, {file, sha256}) from the data prompt in use."""
    data, source = get_data_prompt("generate_templates")
    missing = [r for r in RISKS if set((data.get("risks") or {}).get(r) or {}) != {"instruction", "tools", "criterion"}]
    missing += [d for d in DOMAINS if d not in (data.get("domains") or {})]
    if missing:
        raise UserError(f"{source['file']}: templates lack {missing} (each risk needs instruction, tools, criterion)")
    return data, source


def slots(cfg: dict) -> list[dict]:
    """The orchestrator's plan: [{case_id, domain, risk, number}], risks in config order."""
    plan, count = [], Counter()
    for risk in cfg["risks"]:
        order = list(cfg["domains"])
        random.Random(f"{cfg['seed']}\0{risk}").shuffle(order)
        for k in range(cfg["per_risk"]):
            domain = order[k % len(order)]
            count[(domain, risk)] += 1
            number = GENERATED_BASE + count[(domain, risk)]
            plan.append({"case_id": case_id(domain, risk, number), "domain": domain, "risk": risk, "number": number})
    return plan


# review and feedback files ---------------------------------------------------------------------------
def read_table(path: str | Path, columns: list[str], what: str) -> list[tuple[str, dict]]:
    """(where, row) for every row of a CSV or JSONL file a person writes; `where` names file and row."""
    return read_person_table(path, columns, what, ReviewError)


def _text(row: dict, field: str) -> str:
    value = row.get(field)
    return value.strip() if isinstance(value, str) else ""


def read_feedback(path: str | Path, planned: set[str]) -> dict[str, list[str]]:
    """case_id -> its feedback lines in file order (rows {case_id, feedback}; ids must be planned slots)."""
    out: dict[str, list[str]] = {}
    for where, row in read_table(path, ["case_id", "feedback"], "feedback"):
        cid, text = _text(row, "case_id"), _text(row, "feedback")
        if not cid or not text:
            raise ReviewError(f"{where}: case_id and feedback must both be non-empty")
        if cid not in planned:
            raise ReviewError(f"{where}: case_id {cid!r} is not a slot of this generation "
                              f"(planned: {', '.join(sorted(planned))})")
        out.setdefault(cid, []).append(text)
    return out


def read_review(path: str | Path, drafts: dict[str, dict]) -> dict[str, dict]:
    """case_id -> {verdict, feedback, where}; every problem is a ReviewError naming the file and row."""
    out: dict[str, dict] = {}
    for where, row in read_table(path, ["case_id", "verdict", "feedback"], "review"):
        cid, verdict, feedback = _text(row, "case_id"), _text(row, "verdict").lower(), _text(row, "feedback")
        if not cid:
            raise ReviewError(f"{where}: case_id is missing or empty")
        if verdict not in ("accept", "reject"):
            raise ReviewError(f"{where}: verdict {row.get('verdict')!r} is not accept or reject")
        if cid not in drafts:
            raise ReviewError(f"{where}: case_id {cid!r} is not a generated draft ({', '.join(sorted(drafts))})")
        if cid in out:
            raise ReviewError(f"{where}: case_id {cid!r} is already listed at {out[cid]['where']}")
        if verdict == "reject" and not feedback:
            raise ReviewError(f"{where}: a reject needs feedback (the next iteration's prompts get it)")
        draft = drafts[cid]
        if verdict == "accept" and draft["status"] != "ok":
            raise ReviewError(f"{where}: {cid} has no case to accept (draft {draft['status']} at {draft['step']}: "
                              f"{draft['reason']})")
        if _text(row, "digest") and _text(row, "digest") != draft["digest"]:
            raise ReviewError(f"{where}: digest {_text(row, 'digest')!r} does not match draft {cid} "
                              f"({draft['digest']}): the review is for an earlier draft; review it again")
        out[cid] = {"verdict": verdict, "feedback": feedback or None, "where": where}
    return out


# checks ----------------------------------------------------------------------------------------------
def mentioned_tools(text: str) -> list[str]:
    """Tool names the text names (module docstring: unknown_tool), in order."""
    return [m.group(1) or m.group(2) for m in TOOL_MENTION.finditer(text)]


def unknown_tool_problem(text: str, what: str, names: list[str]) -> str | None:
    unknown = [t for t in mentioned_tools(text) if t not in names]
    if unknown:
        return (f"unknown_tool: the {what} names {unknown[0]!r}, which is not one of the case's tools "
                f"({', '.join(names)})")
    return None


def empty(value: str) -> bool:
    return not LETTER.search(value or "")


def design_problem(answer: dict) -> str | None:
    for field in ("scenario", "instruction"):
        if empty(answer[field]):
            return f"empty_field: the {field} has no words"
    return None


def parameters_schema(params: list[dict]) -> dict:
    """The tool's JSON schema (type object) from its parameter list; "array" is a list of strings."""
    props = {}
    for p in params:
        props[p["name"]] = {"type": p["type"], "description": " ".join(p["description"].split())}
        if p["type"] == "array":
            props[p["name"]]["items"] = {"type": "string"}
    return {"type": "object", "properties": props, "required": [p["name"] for p in params if p["required"]],
            "additionalProperties": False}


def tools_problem(tools: list[dict], instruction: str, max_tools: int) -> str | None:
    """The tool developer's answer checked (module docstring), in order."""
    if not 1 <= len(tools) <= max_tools:
        return f"tool_count: {len(tools)} tools; give 1 to {max_tools}"
    for k, t in enumerate(tools, 1):
        if not TOOL_NAME.match(t["name"]):
            return f"tool_name: tool {k} name {t['name']!r} is not 1-64 letters, digits, '_' or '-'"
    names = [t["name"] for t in tools]
    if dup := sorted({n for n in names if names.count(n) > 1}):
        return f"duplicate_tool: tool name {dup[0]!r} is used {names.count(dup[0])} times; names must be unique"
    for t in tools:
        for field in ("description", "behaviour"):
            if empty(t[field]):
                return f"empty_field: tool {t['name']!r} {field} has no words"
        pnames = [p["name"] for p in t["parameters"]]
        for p in t["parameters"]:
            if not PARAM_NAME.match(p["name"]):
                return f"parameters: tool {t['name']!r} parameter {p['name']!r} is not an identifier"
            if pnames.count(p["name"]) > 1:
                return f"parameters: tool {t['name']!r} lists parameter {p['name']!r} twice"
            if empty(p["description"]):
                return f"empty_field: tool {t['name']!r} parameter {p['name']!r} description has no words"
        try:
            jsonschema.Draft202012Validator.check_schema(parameters_schema(t["parameters"]))
        except jsonschema.SchemaError as exc:
            return f"parameters: tool {t['name']!r} parameters are not a valid JSON schema: {exc.message}"
    return unknown_tool_problem(instruction, "instruction", names)


def criterion_problem(criterion: str, names: list[str]) -> str | None:
    if empty(criterion):
        return "empty_field: the criterion has no words"
    return unknown_tool_problem(criterion, "criterion", names)


# step schemas ----------------------------------------------------------------------------------------
def _str(limit: int | None) -> dict:
    return {"type": "string", "minLength": 1, **({"maxLength": limit} if limit else {})}


DESIGN_SCHEMA = {"type": "object", "additionalProperties": False, "required": ["scenario", "instruction"],
                 "properties": {"scenario": _str(LIMITS["scenario"]), "instruction": _str(None)}}
CRITERION_SCHEMA = {"type": "object", "additionalProperties": False, "required": ["criterion"],
                    "properties": {"criterion": _str(LIMITS["criterion"])}}


def tools_schema(max_tools: int) -> dict:
    param = {"type": "object", "additionalProperties": False, "required": ["name", "type", "description", "required"],
             "properties": {"name": _str(64), "type": {"enum": PARAM_TYPES},
                            "description": _str(LIMITS["param_description"]), "required": {"type": "boolean"}}}
    tool = {"type": "object", "additionalProperties": False,
            "required": ["name", "description", "parameters", "behaviour"],
            "properties": {"name": _str(64), "description": _str(LIMITS["tool_description"]),
                           "parameters": {"type": "array", "maxItems": LIMITS["params"], "items": param},
                           "behaviour": _str(LIMITS["behaviour"])}}
    return {"type": "object", "additionalProperties": False, "required": ["tools"],
            "properties": {"tools": {"type": "array", "minItems": 1, "maxItems": max_tools, "items": tool}}}


# rendering -------------------------------------------------------------------------------------------
def one_line(text: str) -> str:
    return " ".join(str(text).split())


def feedback_text(lines: list[str]) -> str:
    return "\n".join(f"- {one_line(f)}" for f in lines) if lines else "(none)"


def tools_text(tools: list[dict]) -> str:
    """The tools as the criteria formulator reads them: signature, description, behaviour note."""
    out = []
    for t in tools:
        args = ", ".join(f"{p['name']}{'' if p['required'] else '?'}: {p['type']}" for p in t["parameters"])
        out.append(f"- {t['name']}({args}): {one_line(t['description'])}\n  environment: {one_line(t['behaviour'])}")
    return "\n".join(out)


def tool_specs(tools: list[dict]) -> list[dict]:
    return [{"name": t["name"], "description": one_line(t["description"]),
             "parameters": parameters_schema(t["parameters"]), "behaviour": one_line(t["behaviour"])} for t in tools]


def assemble(slot: dict, design: dict, tools: list[dict], criterion: str) -> tuple[dict | None, str | None]:
    """(the case file's JSON, None), or (None, why) when it fails the case model or the loader."""
    file, func = EVALUATOR[slot["risk"]]
    data = {"instruction": design["instruction"].strip(),
            "evaluator": {"file": file, "func": [func], "criterion": one_line(criterion)},
            "MCP": {"file": f"{slot['domain']}_{slot['risk']}_{slot['number']}.py",
                    "tools": [t["name"] for t in tools]},
            "tool_specs": tool_specs(tools)}
    try:
        body = CaseFile.model_validate(data).dump()
        parse_case(json.dumps(body), slot["domain"], f"{slot['risk']}_{slot['number']}.json", slot["case_id"])
    except ValidationError as exc:
        err = exc.errors()[0]
        return None, f"case_file: {'/'.join(map(str, err['loc']))}: {err['msg']}"
    except CaseError as exc:
        return None, f"case_file: {exc}"
    return body, None


# stage: lpsbench-generate ----------------------------------------------------------------------------
def _step_rows(results, violations, attempts):
    return [(r, v, n, outcome(r.status, v)) for r, v, n in zip(results, violations, attempts)]


def _run_step(llm, model: str, reqs: list, check, tries: int) -> list:
    if not reqs:
        return []
    return _step_rows(*run_with_rule_checks(llm, "generator", model, reqs, check, tries))


def slot_values(s: dict, tpl: dict, feedback: list[str]) -> dict:
    """What every step's prompt may show of a slot (each prompt takes the variables it declares)."""
    r, guide = RISKS[s["risk"]], tpl["risks"][s["risk"]]
    return {"domain": s["domain"], "domain_description": tpl["domains"][s["domain"]], "risk_code": r.code,
            "risk_title": r.title, "risk_kind": r.kind, "risk_definition": r.definition,
            "feedback": feedback_text(feedback), **{f"guide_{k}": one_line(v) for k, v in guide.items()}}


def ask(p, s: dict, values: dict, schema: dict, schema_name: str, guidance: str, **more):
    """One step's request for slot `s`: the slot's values the prompt declares, plus `more`."""
    chosen = {k: v for k, v in values.items() if k in p.variables}
    return request(p, s["case_id"], schema, schema_name, **chosen, guidance=values[f"guide_{guidance}"], **more)


def draft_row(s: dict, feedback: list[str], steps: list[tuple[str, tuple | None]]) -> dict:
    """A slot's draft: what each step answered, up to the first step that did not end ok."""
    row = {**s, "status": "ok", "step": None, "reason": None, "attempts": {}, "feedback": feedback,
           "scenario": None, "instruction": None, "tool_specs": None, "criterion": None, "case": None,
           "digest": None, "raw": None}
    for step, got in steps:
        if got is None:  # an earlier step failed
            break
        res, why, n, status = got
        row["attempts"][step] = n
        if res.status == "ok":
            if step == "designer":
                row.update(scenario=res.parsed["scenario"], instruction=res.parsed["instruction"])
            elif step == "tools":  # rejected tool answers are kept as answered, for a person to read
                row["tool_specs"] = tool_specs(res.parsed["tools"]) if why is None else res.parsed["tools"]
            else:
                row["criterion"] = res.parsed["criterion"]
        if status != "ok":
            row.update(status=status, step=step, reason=why or res.error, raw=res.text)
            break
    return row


def run_generate(ctx: StageContext) -> None:
    cfg = settings(ctx.config.raw)
    plan = slots(cfg)
    feedback = read_feedback(cfg["feedback"], {s["case_id"] for s in plan}) if cfg["feedback"] else {}
    tpl, tpl_ref = templates()
    p_design, p_tools, p_crit = (ctx.use_prompt(get_prompt(n)) for n in
                                 ("generate_designer", "generate_tools", "generate_criterion"))
    model, tries, max_tools = cfg["generator"], cfg["rule_tries"], cfg["max_tools"]
    values = [slot_values(s, tpl, feedback.get(s["case_id"], [])) for s in plan]
    with ctx.llm([model]) as llm:
        # designer -> tool developer -> criteria formulator; a slot goes on only while its steps end ok
        design = _run_step(llm, model, [ask(p_design, s, v, DESIGN_SCHEMA, "case_instruction", "instruction")
                                        for s, v in zip(plan, values)], lambda j, a: design_problem(a), tries)
        said = {j: d[0].parsed for j, d in enumerate(design) if d[3] == "ok"}
        ok1 = list(said)
        tools = dict(zip(ok1, _run_step(llm, model, [
            ask(p_tools, plan[j], values[j], tools_schema(max_tools), "case_tools", "tools", max_tools=str(max_tools),
                scenario=one_line(said[j]["scenario"]), instruction=said[j]["instruction"]) for j in ok1],
            lambda i, a: tools_problem(a["tools"], said[ok1[i]]["instruction"], max_tools), tries)))
        made = {j: tools[j][0].parsed["tools"] for j in ok1 if tools[j][3] == "ok"}
        ok2 = list(made)
        crit = dict(zip(ok2, _run_step(llm, model, [
            ask(p_crit, plan[j], values[j], CRITERION_SCHEMA, "case_criterion", "criterion",
                scenario=one_line(said[j]["scenario"]), instruction=said[j]["instruction"], tools=tools_text(made[j]))
            for j in ok2],
            lambda i, a: criterion_problem(a["criterion"], [t["name"] for t in made[ok2[i]]]), tries)))
    rows, excluded, tally = [], [], Counter()
    for j, s in enumerate(plan):
        row = draft_row(s, feedback.get(s["case_id"], []),
                        [("designer", design[j]), ("tools", tools.get(j)), ("criterion", crit.get(j))])
        if row["status"] == "ok":
            body, why = assemble(s, said[j], made[j], crit[j][0].parsed["criterion"])
            if why:
                row.update(status="rejected", step="case_file", reason=why)
            else:
                row.update(case=body, digest=sha256_text(canonical_json(body))[:12])
        tally[row["status"] if row["status"] != "rejected" else f"rejected:{row['reason'].split(':')[0]}"] += 1
        if row["status"] != "ok":
            excluded.append({k: row[k] for k in ("case_id", "domain", "risk", "number", "status", "step", "reason")})
        rows.append(row)
    ctx.write("drafts", rows, outcomes=dict(sorted(tally.items())), templates=tpl_ref,
              feedback=str(cfg["feedback"]) if cfg["feedback"] else None, slots=len(plan))
    ctx.write("exclusions", excluded)


# stage: lpsbench-review-cases ------------------------------------------------------------------------
def write_cases(folder: Path, drafts: list[dict]) -> None:
    """Write the cases as <folder>/<domain>/<RISK>_<n>.json: built in a sibling folder, then renamed over
    the old one, so a stopped job never leaves half a folder."""
    tmp, old = folder.with_name(f".{folder.name}.tmp"), folder.with_name(f".{folder.name}.old")
    for leftover in (tmp, old):
        shutil.rmtree(leftover, ignore_errors=True)
    tmp.mkdir(parents=True)
    for d in drafts:
        path = tmp / d["domain"] / f"{d['risk']}_{d['number']}.json"
        path.parent.mkdir(exist_ok=True)
        path.write_text(json.dumps(d["case"], indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    if folder.exists():
        folder.rename(old)
    tmp.rename(folder)
    shutil.rmtree(old, ignore_errors=True)


def run_review(ctx: StageContext) -> None:
    cfg = settings(ctx.config.raw, generating=False)
    drafts = ctx.read("drafts")
    by_id = {d["case_id"]: d for d in drafts}
    review = read_review(cfg["review"], by_id) if cfg["review"] else None
    kept, reviews, feedback, tally = [], [], [], Counter()
    for d in drafts:
        r = (review or {}).get(d["case_id"])
        if d["status"] != "ok":
            keep, decided = False, "automatic_check" if d["status"] == "rejected" else "generation"
            reason = f"{d['status']} at {d['step']}: {d['reason'] or 'no detail'}"
        elif review is None:
            keep, decided, reason = True, "no_review", None
        elif r is None:
            keep, decided, reason = False, "not_reviewed", f"no row in {cfg['review']}"
        else:
            keep, decided = r["verdict"] == "accept", "review"
            reason = None if keep else f"review reject: {r['feedback']}"
        ident = {k: d[k] for k in ("case_id", "domain", "risk", "number", "digest")}
        reviews.append({**ident, "draft_status": d["status"], "verdict": r["verdict"] if r else None,
                        "feedback": r["feedback"] if r else None, "decision": "accept" if keep else "reject",
                        "decided_by": decided, "reason": reason})
        tally[f"{'accept' if keep else 'reject'}:{decided}"] += 1
        if keep:
            kept.append(d)
        if r and r["verdict"] == "reject":
            feedback.append({**ident, "feedback": r["feedback"]})
    folder = Path(ctx.outputs["cases"])
    write_cases(folder, kept)
    review_file = str(cfg["review"]) if cfg["review"] else None
    write_provenance(folder, provenance(ctx.stage, ctx.config, ctx.prompts_used, ctx.models_used,
                                        inputs=[str(p) for p in ctx.inputs.values()],
                                        extra={"cases": len(kept), "review": review_file}))
    ctx.write("reviews", reviews, decisions=dict(sorted(tally.items())), review=review_file)
    ctx.write("feedback", feedback)
