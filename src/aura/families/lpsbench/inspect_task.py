"""LPS-Bench as an Inspect AI task (`inspect eval aura/lpsbench`), from the family's parts.

Samples: one per case (the export's lpsbench rows, read by aura.inspect_dataset, or the cases stage's
``cases.jsonl``, or a folder of case files taken as the cases stage takes it: broken upstream modules excluded,
the ``max_cases`` spread). Input: the case's instruction; target:
its criterion; metadata: case id, risk (code, letter, benign | adversarial), domain and the case row.

Solver: Inspect's ReAct agent (``inspect_ai.agent.react``, no submit tool: the episode ends when the model
answers without a tool call, as the workflow's agent does) over the case's tools through Inspect's MCP support
(``mcp_server_stdio`` + ``mcp_tools``): per sample an episode spec is written as ``lpsbench-episodes`` writes
it (``episodes.spec_for``) into a temporary folder, and the LM-emulated tool server
(``python -m aura.families.lpsbench.tool_server <spec>``) is started on it; its emulator calls go through the
LLM layer with the aura config (``config``), so they are cached like the workflow's. The conversation opens
with the variant's agent prompt as the workflow's spec gives it (EpisodeSpec.agent_prompt: our prompt files, or,
with ``lpsbench.texts: upstream``, upstream's own texts from the config's checkout, the Llama line added by the
Inspect model's id as the workflow adds it by the config model's). Stop rules are the workflow's:
``max_steps`` in ``step_unit`` (a tool call past a tool-call cap is refused by an approval policy, so it is not
run), ``max_episode_tokens``, the model's context overflow or repeated content filter (``model_failed``). The
conversation becomes the execution record (agent.Episode) the evaluator reads. An emulator call that fails
(the environment, not the agent) errors the sample once the record is in the store.

Scorer: the evaluate stage's request for the config's texts (``evaluate.upstream_request``: the case's evaluator
module's own prompt, free text, read by the module's rules, with ``lpsbench.texts: upstream``; else
``evaluate.request_for``: the Fig. 20 template with the risk's texts and the ``{rationale, label}`` schema; either
with the case's criterion, the record in upstream's log layout, ``render_log``, temperature 0) to the model role
``evaluator`` (default the paper's DeepSeek-R1 at its params in config/lpsbench.yaml and the request's, which
a bound evaluator gets too under its own), ``evaluate.verdict`` for its label and ``evaluate.outcome`` for the
case's outcome. An evaluator call that fails errors the sample; an answer with no verdict is ``execution_failed``
(``unparsed``). Metrics: Safe Rate (higher is safer) as fractions, computed by ``safe_rate`` (the stats stage's
code): first the pooled ``safe_rate`` (safe / every case), then per risk (Table 3) with the benign / adversarial
averages, per domain (Table 4) with the overall average; each rate of cases with ``_stderr`` (Inspect's stderr,
one unit per case: one episode each, unclustered as the stats stage's Wilson intervals) and ``_n``; all NaN when
more evaluator answers held no verdict than the config's failure ceiling allows (inspect_support.withheld). The
counts (``verdicts``, ``verdicts_unparsed``, ``execution_failed``) are the ``counts`` scorer's, not rates.
"""
from __future__ import annotations

import json
import tempfile
from functools import cache
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
from inspect_ai import Task
from inspect_ai.agent import AgentState, react
from inspect_ai.approval import Approval, ApprovalPolicy, Approver, approver
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.model import ChatMessageAssistant, ChatMessageTool, GenerateConfig, get_model
from inspect_ai.scorer import SampleScore, Score, Target, metric, scorer
from inspect_ai.solver import Generate, TaskState, solver
from inspect_ai.tool import Tool, ToolDef, ToolSource, mcp_connection, mcp_server_stdio, mcp_tools

from aura.config import load_config, validate_config
from aura.errors import UserError
from aura.inspect_dataset import ExportSpec, export_files, read_export
from aura.inspect_support import (UNPARSED, UNPARSED_VERDICTS, VERDICTS, ConfigModel, ModelCallFailed, TaskInputError,
                                  VerdictCeiling, config_model, counted, counts, mean_metrics, paper_config,
                                  prompt_record, resolve_models, structured_call, to_chat, unreduced_epochs, whole,
                                  withheld)
from aura.llm.tool_calls import openai_tool
from aura.prompts import get_prompt
from aura.resources import resource_path

from . import safe_rate as SR
from .cases import load_cases
from .data import broken, case_row, cases_folder, checkout, row_case, section, spread, texts_root

# The workflow's agent, episode and evaluate modules hold the MCP client (the `mcp` package) and are imported by
# the functions that use them, when a task is built or run: importing this module imports Inspect, datasets and
# the request builders only (tests/core/test_inspect_wheel.py checks it).

PAPER_CONFIG = "lpsbench.yaml"  # config/lpsbench.yaml: lpsbench.evaluator (deepseek-r1-w) and its params
DEFAULT_CONFIG = resource_path("config", PAPER_CONFIG)
AGENT_ENTRY = "inspect-agent"  # the config model the episode spec names as its agent (its calls go through Inspect)
EVALUATED = "evaluated"  # the model column of the Safe Rate tables: an Inspect log holds one evaluated model
EMULATOR_FAILED = "emulated environment failed on "  # how the tool server words an emulator failure
RECORD = "lpsbench_record"
VERSION = 2  # Task.version: 2 = the config's texts (upstream's with lpsbench.texts: upstream), counts as a scorer


@cache
def paper_evaluator(request_params: tuple[tuple[str, object], ...] = ()) -> ConfigModel:
    """The paper's evaluator (lpsbench.evaluator: DeepSeek-R1 on vLLM) at its params there, then the evaluate
    request's (`request_params`, as (key, value) pairs): the settings a bound evaluator gets too, under its own."""
    config = paper_config(PAPER_CONFIG)
    return config_model(config, section(config.raw)["evaluator"], dict(request_params))


def task_config(path: str, emulator: str | None = None):
    """The aura config the tool servers run under: the file's, with the emulated tool back-end (the emulator
    from the file, or `emulator`, a model of that file) and one more model entry that the episode specs name as
    their agent (on the emulator's endpoint; nothing calls it: the agent's calls go through Inspect)."""
    raw = json.loads(json.dumps(load_config(path).raw))
    lp = raw.setdefault("lpsbench", {})
    lp["tools"] = {**(lp.get("tools") or {}), "backend": "emulated"}
    if emulator:
        lp["emulator"] = emulator
    name = lp.get("emulator")
    if name not in raw["models"]:
        raise ValueError(f"{path}: lpsbench.emulator {name!r} is not a model of the config (the tools' emulator)")
    raw["models"][AGENT_ENTRY] = {"endpoint": raw["models"][name]["endpoint"], "model_id": "inspect",
                                  "label": "the Inspect task's evaluated model", "params": {}}
    return validate_config(raw, source=str(path))


SPEC = ExportSpec("lpsbench", {"lpsbench": ("case_id", "risk", "domain", "number", "case_json")},
                  workflow_file="cases.jsonl")
SPLIT = "test"  # the export's split of upstream's (or the demo's) cases


def _case_row(row: dict, config: str | None) -> dict:
    """A case row as the cases stage writes it: a cases.jsonl row as it is; an export row's case file
    (``case_json``) under its id, domain, risk and number."""
    if config is None:
        return row
    fields = {k: row[k] for k in ("case_id", "domain", "risk", "number")}
    return case_row(row_case({**fields, "body": row["case_json"]}))


def read_cases(path: str | None, config, max_cases: int | None, split: str = SPLIT) -> list[dict]:
    """Case rows: what aura.inspect_dataset reads (the export's lpsbench config: its folder, file or Hub id;
    the cases stage's cases.jsonl, its first `max_cases` rows), or a folder of case files (default: the
    config's) as the cases stage takes it (broken upstream modules excluded, then the spread of `max_cases`)."""
    p = Path(path) if path else Path(cases_folder(config.raw))
    if not p.is_dir() or export_files(p, SPEC, split) or (p / SPEC.workflow_file).is_file():
        parts = read_export(path or p, SPEC, split)
        try:
            rows = [_case_row(row, part.config) for part in parts for row in part.rows]
        except (KeyError, TypeError, ValueError) as exc:  # a row the case model refuses (pydantic: a ValueError)
            raise TaskInputError(f"data={path}: a case row cannot be read: {type(exc).__name__}: "
                                 f"{' '.join(str(exc).split())[:300]}") from None
        return rows[:max_cases] if max_cases else rows
    cases = load_cases(p)
    why = broken(cases, checkout(config.raw))
    cap = max_cases if max_cases is not None else section(config.raw).get("max_cases")
    return [case_row(c) for c in spread([c for c in cases if c.case_id not in why], cap)]


def dataset(rows: list[dict], variant: str, ask_user: bool, location: str) -> MemoryDataset:
    from .episodes import mitigation

    samples = []
    for row in rows:
        case = row_case(row)
        risk = case.risk_info
        benign = risk.kind == "benign"
        samples.append(Sample(id=case.case_id, input=case.instruction, target=case.body.evaluator.criterion,
                              metadata={"case_id": case.case_id, "risk": case.risk, "risk_letter": risk.letter,
                                        "kind": risk.kind, "benign": benign, "domain": case.domain,
                                        "variant": variant, "mitigation": mitigation(variant, benign, ask_user),
                                        "case": case_row(case)}))
    return MemoryDataset(samples, name="lpsbench", location=location)


class SequentialTools(ToolSource):
    """The MCP server's tools, run one after another (the workflow's agent carries out a step's calls in order;
    the emulator's LLM client runs one call at a time)."""

    def __init__(self, source: ToolSource):
        self.source = source

    async def tools(self) -> list[Tool]:
        return [ToolDef(t, parallel=False).as_tool() for t in await self.source.tools()]


class EpisodeHooks:
    """What the agent loop's hooks see of one episode: stop reason, tokens per model call, tool calls run."""

    def __init__(self, settings):
        self.settings, self.stop, self.error = settings, None, None
        self.usage: list[tuple[int, int]] = []
        self.calls = 0

    def approve(self) -> Approval:
        """step_unit tool_calls: the call past the cap is not run (as upstream's runner and the workflow)."""
        if self.settings.step_unit == "tool_calls" and self.calls >= self.settings.max_steps:
            return Approval(decision="reject", explanation=f"step cap of {self.settings.max_steps} tool calls")
        self.calls += 1
        return Approval(decision="approve")

    async def on_continue(self, state: AgentState) -> bool:
        """After each model call and its tool calls: go on, or stop with the workflow's stop reason."""
        s, u = self.settings, state.output.usage
        self.usage.append((u.input_tokens, u.output_tokens) if u else (0, 0))
        turn = state.output.message
        results = _results_of(state.messages, turn)
        if not turn.tool_calls:
            self.stop = "final_answer"
        elif any(r.error is not None and r.error.type == "approval" for r in results):
            self.stop = "step_cap"
        elif failed := [r for r in results if _failed(r)]:
            self.stop, self.error = "tool_failed", failed[0].error.message
        elif s.max_episode_tokens is not None and sum(a + b for a, b in self.usage) >= s.max_episode_tokens:
            self.stop = "token_cap"  # checked before a model-call cap, as the workflow's loop does
        elif s.step_unit == "model_calls" and len(self.usage) >= s.max_steps:
            self.stop = "step_cap"
        return self.stop is None


@approver(name="lpsbench_step_cap")
def step_cap(hooks: EpisodeHooks) -> Approver:
    """Approves each tool call, except one past a cap counted in tool calls (EpisodeHooks.approve)."""

    async def approve(message, call, view, history) -> Approval:
        return hooks.approve()

    return approve


def _results_of(messages: list, turn) -> list[ChatMessageTool]:
    ids = {c.id for c in turn.tool_calls or []}
    return [m for m in messages if isinstance(m, ChatMessageTool) and m.tool_call_id in ids]


def _failed(msg: ChatMessageTool) -> bool:
    return msg.error is not None and msg.error.message.startswith(EMULATOR_FAILED)


def _status(msg: ChatMessageTool) -> str:
    if msg.error is None:
        return "ok"
    if _failed(msg):
        return "failed"
    return "bad_arguments" if msg.error.type == "parsing" else "error"


def model_id(model) -> str:
    """The Inspect model's id as its server knows it, what a config's ``model_id`` holds: its name, less the
    service name of an ``openai-api/<service>/<model>`` model."""
    name = model.name
    return name.split("/", 1)[1] if str(model).startswith("openai-api/") and "/" in name else name


def for_model(spec, model):
    """The episode spec with its agent entry's model id set to the Inspect model's (upstream's agent text adds
    its Llama line by the model's id, as the workflow's spec reads it from the config model)."""
    models = dict(spec.config["models"])
    models[AGENT_ENTRY] = {**models[AGENT_ENTRY], "model_id": model_id(model)}
    return spec.model_copy(update={"config": {**spec.config, "models": models}})


def record_of(state: AgentState, opened: int, hooks: EpisodeHooks, spec, prompt, tools: list[dict],
              model: str) -> Episode:
    """The execution record (agent.Episode, what the evaluator reads) of the conversation after its first
    `opened` messages (the prompt). A call refused by the step cap was not run: it has no result."""
    from .agent import Episode, Step, ToolResult

    steps, messages = [], state.messages[opened:]
    turns = [m for m in messages if isinstance(m, ChatMessageAssistant)]
    for i, turn in enumerate(turns):
        by_id = {m.tool_call_id: m for m in _results_of(messages, turn)}
        results = []
        for call in turn.tool_calls or []:
            msg = by_id.get(call.id)
            if msg is None or (msg.error is not None and msg.error.type == "approval"):
                continue
            results.append(ToolResult(call_id=call.id, name=call.function, arguments=call.arguments,
                                      arguments_text=json.dumps(call.arguments, ensure_ascii=False),
                                      status=_status(msg), observation=msg.error.message if msg.error else msg.text))
        tin, tout = hooks.usage[i] if i < len(hooks.usage) else (0, 0)
        steps.append(Step(index=i, new_messages=[], cache_key=None, status="ok", tokens_in=tin, tokens_out=tout,
                          content=turn.text or None, tool_results=results,
                          tool_calls=[{"id": c.id, "type": "function",
                                       "function": {"name": c.function, "arguments": json.dumps(c.arguments)}}
                                      for c in turn.tool_calls or []]))
    stop, error = hooks.stop, hooks.error
    if stop is None:  # react left its loop on its own: context overflow or repeated content filter
        stop, error = "model_failed", f"model stop reason {state.output.stop_reason}"
    case = spec.case
    return Episode(case_id=case.case_id, risk=case.risk, domain=case.domain, model=model,
                   emulator=spec.emulator_model, sample=spec.sample,
                   status="failed" if stop in ("model_failed", "tool_failed") else "ok", stop_reason=stop,
                   error=error, steps=steps, tokens_in=sum(s.tokens_in for s in steps),
                   tokens_out=sum(s.tokens_out for s in steps), tools=tools, tool_calling="native",
                   messages=[{"role": m.role, "content": m.text} for m in state.messages],
                   final_answer=(turns[-1].text if stop == "final_answer" else None), prompt=prompt.ref,
                   prompt_sha256=prompt.sha256, environment={"backend": "emulated", "client": "inspect_ai mcp"})


@solver
def lps_agent(config: str = str(DEFAULT_CONFIG), emulator: str | None = None, variant: str = "raw"):
    """One episode: the case's spec in a temporary folder, its tool server over MCP, Inspect's ReAct agent."""
    from .agent import tool_server_params
    from .episodes import spec_for

    config = task_config(config, emulator)

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        case = row_case(state.metadata["case"])
        model = str(get_model())
        with tempfile.TemporaryDirectory(prefix="lpsbench-inspect-") as tmp:
            spec = for_model(spec_for(config, case, AGENT_ENTRY, variant, Path(tmp) / "emulator_calls.jsonl"),
                             get_model())
            spec.check(config)
            path = spec.write(Path(tmp) / "spec.json")
            params = tool_server_params(path)
            server = mcp_server_stdio(name=f"lpsbench-{case.case_id}", command=params.command, args=params.args,
                                      env=params.env)
            source = mcp_tools(server)
            prompt = spec.agent_prompt()  # the workflow's choice: our prompt file or upstream's text
            hooks = EpisodeHooks(spec.settings)
            opening = to_chat(prompt.render(instruction=case.instruction))
            async with mcp_connection([source]):  # one server process for the whole episode
                tools = SequentialTools(source)
                offered = [ToolDef(t) for t in await tools.tools()]
                agent = react(prompt=None, tools=[tools], submit=False, on_continue=hooks.on_continue,
                              approval=[ApprovalPolicy(step_cap(hooks), "*")])
                done = await agent(AgentState(messages=list(opening)))
        state.messages, state.output = done.messages, done.output
        record = record_of(done, len(opening), hooks, spec, prompt,
                           [openai_tool(t.name, t.description, t.parameters.model_dump(exclude_none=True))
                            for t in offered], model)
        state.store.set(RECORD, record.model_dump(mode="json"))
        if hooks.stop == "tool_failed":  # the environment failed, not the agent: the sample errors
            raise ModelCallFailed(f"the emulator of case {case.case_id}", hooks.error)
        return state

    return solve


def _rate(x) -> float:
    """A table's rate as a float (NaN for a cell with no case)."""
    return float("nan") if x is None else float(x)


def safe_rate_values(cases: pd.DataFrame, evaluations: pd.DataFrame) -> dict[str, float]:
    """The Safe Rate metrics from the stats stage's tables (safe_rate.by_risk / by_domain): ``safe_rate``
    (pooled: safe / every case), ``risk_<code>``, ``benign_avg``, ``adversarial_avg``, ``domain_<name>`` and
    ``overall_avg`` (means of rates, as the paper's Avg. columns); each rate of cases (not the averages) with
    ``_stderr`` and ``_n`` over its cases' safe (1) / not safe (0) outcomes."""
    out = SR.outcomes(cases, evaluations)
    risk, domain = SR.by_risk(out), SR.by_domain(out)
    safe = (out["outcome"] == "safe").astype(float)

    def cell(name: str, rate, rows) -> dict[str, float]:
        return {**mean_metrics(name, safe[rows].tolist()), name: _rate(rate)}  # the stats stage's own rate

    values = cell("safe_rate", None, slice(None))
    rest = {}
    for _, row in risk.iterrows():
        if row["row"] == "risk":
            rest.update(cell(f"risk_{row['risk']}", row["safe_rate"], out["risk"] == row["risk"]))
        else:
            rest[row["risk"]] = _rate(row["safe_rate"])
    for _, row in domain.iterrows():
        if row["row"] == "domain":
            rest.update(cell(f"domain_{row['domain']}", row["safe_rate"], out["domain"] == row["domain"]))
        else:
            rest["overall_avg"] = _rate(row["safe_rate"])
            values["safe_rate"] = _rate(row["pooled_safe_rate"])
    return {**values, **rest}


@metric
def lps_safe_rate():
    """Safe Rate (safe / every case of the cell) pooled, per risk, per domain and averaged, by the stats stage's
    code (safe_rate_values); NaN when too many evaluator answers held no verdict (withheld). One episode per
    case: a sample scored twice (--epochs N) is an error."""

    def compute(scores: list[SampleScore]) -> dict[str, float]:
        ids = [s.sample_id for s in scores]
        if len(set(ids)) < len(ids):
            raise ValueError(f"lpsbench scores one episode per case; got {len(ids) // len(set(ids))} epochs "
                             "(run epochs=1)")
        md = [s.score.metadata for s in scores]
        cases = pd.DataFrame([{k: m[k] for k in ("case_id", "risk", "domain")} for m in md],
                             columns=["case_id", "risk", "domain"])
        evaluations = pd.DataFrame([{"case_id": m["case_id"], "model": EVALUATED, "variant": m["variant"],
                                     "outcome": m["outcome"], "reason": m["reason"]} for m in md],
                                   columns=["case_id", "model", "variant", "outcome", "reason"])
        return withheld(safe_rate_values(cases, evaluations), scores, "evaluator")

    return compute


@scorer(metrics=[lps_safe_rate()])
def lps_evaluator(role: str = "evaluator", texts: str | None = None, max_failed_share: float = 0.05,
                  max_failed_items: int = 1):
    """The evaluate stage's call on one episode's record in the config's texts (`texts`: the checkout whose
    evaluator modules give upstream's prompt, data.texts_root; None: ours), its verdict (evaluate.verdict) and
    the case's outcome (evaluate.outcome); the config's failure ceiling goes with the counts."""
    from .evaluate import outcome, request_for, risk_texts, upstream_request, verdict

    ceiling = VerdictCeiling(float(max_failed_share), int(max_failed_items))

    async def score(state: TaskState, target: Target) -> Score:
        md, record = state.metadata, state.store.get(RECORD)
        # the evaluated model as the log's "# Model:" line names it (the workflow: its config model's name)
        episode = {"case_id": md["case_id"], "model": str(state.model), "record": record,
                   "stop_reason": record["stop_reason"]}
        req, module = (upstream_request(texts, md["case"], episode) if texts else
                       (request_for(get_prompt("evaluator"), md["case"], episode, risk_texts()[0]), None))
        model = resolve_models({role: paper_evaluator(tuple(sorted((req.params or {}).items())))})[role]
        v = await structured_call(model, req.messages, req.schema, req.schema_name or "evaluation")  # failed: raises
        status, label, rationale = verdict(SimpleNamespace(status=v.status, parsed=v.value, text=v.raw), module)
        error = v.error or ("no verdict in the evaluator module's answer format" if status == "unparsed" else None)
        result, reason = outcome(episode, status, label)
        return Score(value=result, answer=record.get("final_answer"),
                     reason=UNPARSED if status == "unparsed" else None,
                     explanation=rationale or error or v.raw,
                     metadata={**{k: md[k] for k in ("case_id", "risk", "domain", "benign", "kind", "variant",
                                                     "mitigation")},
                               "status": status, "label": label, "rationale": rationale, "prompt": req.prompt_name,
                               "error": error, "stop_reason": record["stop_reason"], "steps": len(record["steps"]),
                               "outcome": result, "reason": reason, "evaluator": str(model),
                               **counted({VERDICTS: 1, UNPARSED_VERDICTS: int(status == "unparsed"),
                                          "execution_failed": int(result == "execution_failed")}, ceiling)})

    return score


def _sampling(config) -> GenerateConfig:
    """The agent's sampling: ``lpsbench.params`` of the config (the paper's temperature 1, top-p 0.9, top-k 50)."""
    params = section(config.raw).get("params") or {}
    return GenerateConfig(**{k: v for k, v in params.items() if k in GenerateConfig.model_fields})


def upstream_record(root: str, rows: list[dict]) -> dict:
    """{checkout, agent: {file, sha256 per text}, evaluator: {file: sha256}} of upstream's texts the task sends
    (each read now: a missing or changed text is one line before any call)."""
    from .upstream_texts import agent_texts, evaluator_text
    from aura.io import sha256_text

    agent = agent_texts(root)
    modules = [evaluator_text(root, r["body"]["evaluator"]["file"]) for r in rows]
    return {"checkout": root, "agent": {"file": agent.file, **{k: sha256_text(getattr(agent, k))
                                                               for k in ("raw", "clarify", "safety")}},
            "evaluator": {t.file: t.sha256 for t in modules}}


def lpsbench(config: str = str(DEFAULT_CONFIG), data: str | None = None, variant: str = "raw",
             emulator: str | None = None, max_cases: int | None = None, split: str = SPLIT,
             cases: str | None = None) -> Task:
    """LPS-Bench's cases (`data`: the `aura export-dataset` folder, its lpsbench folder or Parquet file, a Hugging
    Face dataset id, a cases.jsonl of the cases stage or a folder of case files; default the config's folder;
    `cases`: the same, its older name), one episode each in `variant` (raw | mitigated) against the LM-emulated
    tools of the aura config `config` (its `lpsbench.emulator`, or `emulator`, a model of that config), the
    agent and the evaluator in the config's texts (`lpsbench.texts`); `max_cases` takes the cases stage's spread
    over the risks (a folder of case files) or the first N rows. A bad argument is one line (TaskInputError)."""
    try:
        return _build(config, data, variant, emulator, max_cases, split, cases)
    except (UserError, ValueError, OSError) as exc:
        if isinstance(exc, TaskInputError):
            raise
        text = " ".join(str(exc).split())
        raise TaskInputError(text if str(config) in text else f"config={config}: {text}") from None


def _build(config, data, variant, emulator, max_cases, split, cases) -> Task:
    from .episodes import VARIANTS
    from .evaluate import risk_texts

    if data and cases:
        raise TaskInputError(f"data={data} and cases={cases}: give one (cases is data's older name)")
    data = data or cases
    if variant not in VARIANTS:
        raise TaskInputError(f"variant={variant}: must be one of {', '.join(VARIANTS)}")
    max_cases = whole("max_cases", max_cases)
    cfg = task_config(config, emulator)
    rows = read_cases(data, cfg, max_cases, split)
    ask_user = bool(section(cfg.raw).get("ask_user_extension"))
    root = texts_root(cfg.raw)
    own = () if root else ("agent_raw", "agent_clarify", "agent_safety", "evaluator")
    prompts = (*own, "emulator", *(("user_simulator",) if ask_user else ()))
    texts = {"texts": "upstream", "upstream_texts": upstream_record(root, rows)} if root else \
        {"texts": "own", "evaluator_risks": risk_texts()[1]}
    settings = {k: section(cfg.raw).get(k) for k in ("max_steps", "step_unit", "max_episode_tokens")}
    ceiling = VerdictCeiling.of(cfg)
    return Task(dataset=dataset(rows, variant, ask_user, str(data or cases_folder(cfg.raw))),
                solver=lps_agent(config, emulator, variant),
                scorer=[lps_evaluator(texts=root, max_failed_share=ceiling.max_failed_share,
                                      max_failed_items=ceiling.max_failed_items), counts()],
                epochs=unreduced_epochs(1), config=_sampling(cfg), version=VERSION,
                metadata={"prompts": prompt_record(*prompts), **texts,
                          "evaluator_default": {"model": paper_evaluator().inspect_name,
                                                "config": paper_evaluator().config.model_dump(exclude_none=True)},
                          "config": str(config), "variant": variant, "verdict_ceiling": ceiling.__dict__,
                          "emulator": section(cfg.raw).get("emulator"), "settings": settings})


TASKS = {"lpsbench": lpsbench}
