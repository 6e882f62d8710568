"""Stage ``lpsbench-episodes``: every case's episode for one evaluated model and one variant.

    python -m aura lpsbench-episodes --configfile C --model M --option variant=raw|mitigated \
        --in cases=<cases.jsonl> --out episodes=<episodes/{variant}/{model}.jsonl>

Each case runs once (sample 0) through :func:`.agent.run_case`: the agent loop over an MCP tool server (a
subprocess per episode): upstream's own mock-tool module of the case (``lpsbench.tools.backend: upstream``,
the paper's environment; see upstream_tools.py) or the LM-emulated environment (``emulated``: for an upstream
case the agent sees the tools' real signatures, read from the module's source with ``ast``, and the emulator
gets that source as their behaviour; a generated case brings its own specs). Variants (paper §4.5, prompts
only; both offer the same tools):

- ``raw``: the raw system prompt (``agent_raw``) for every case;
- ``mitigated``: benign risks (a-d) get human-in-the-loop clarification in the system prompt
  (``agent_clarify``: the agent pauses by asking the user in its reply, which ends the episode; the
  evaluator judges that record), adversarial risks (e-i) the safety-aware prompt (``agent_safety``).
  The ask_user extension (``lpsbench.ask_user_extension``, beyond the paper, off in its config) adds an
  ``ask_user`` tool to the benign ones, answered by the simulated user (``lpsbench.user_simulator``).

Settings: ``lpsbench.max_steps`` in ``lpsbench.step_unit`` (model calls, or tool calls as upstream counts),
``lpsbench.max_episode_tokens``, ``lpsbench.params`` over the model's params (``lpsbench.model_params`` names
models that get their own instead, e.g. ``{}`` for reasoning models that accept only their default sampling;
``top_k``/``min_p`` only where the endpoint takes them: dropped for the others, as the paper's "top-k where
the endpoint takes it"), ``lpsbench.emulator``, ``lpsbench.tools`` (every case's module is looked up before
the first episode starts). How the agent calls tools follows the agent model's endpoint (``tool_calling``:
native, or one forced ``act`` tool; see agent.py).

Resumable: every agent, emulator and user call is cached as it arrives, so a rerun after a kill replays
the answered calls and sends only the rest. Bounded by the caps. The episodes run concurrently up to the
agent endpoint's ``max_concurrency``, one LLMClient per running episode (an LLMClient runs one episode at
a time); the output is written once, atomically, when every episode is done. A job-level failure (fatal
endpoint error, the failure ceiling) fails the job with nothing written.

An episode lost to its infrastructure (its tool server died or could not start; on the emulated back-end, the
emulator's or simulated user's call failed; see retry.py) is tried again, ``lpsbench.episode_retries`` more times,
each with a new tool server (the answered calls replay from the cache). Lost in every try, it is kept: a
``failed`` row with the furthest record its tries reached (the evaluator judges it), or, when no try had a record,
stop_reason ``error`` and record null. The job then says so in one warning line and raises the count in the
``<episodes>.retry.json`` sidecar that the rule's params carry, so the next plain ``snakemake`` run retries the job.
The tries repeated are the job's ``infra_retries`` (its summary file and the ``aura summary`` line).
The tool servers append their call records as the calls complete, so a killed server's answers are accounted for.

Row: ``case_id, model, variant, risk, benign, domain, status (ok|failed), stop_reason, steps, tokens,
final_answer, error, mitigation (none|ask_user|safety_prompt), tries, record`` (tries: how many times the episode
ran; the execution record, :class:`.agent.Episode`, embedded as a JSON object; null when no try had one).
"""
from __future__ import annotations

import asyncio
import json
import sys
import tempfile
from collections import Counter
from contextlib import ExitStack
from dataclasses import fields
from pathlib import Path

from aura.config import ConfigError
from aura.llm.accounting import CallRecord
from aura.llm.errors import StageFailed, TooManyFailures
from aura.prompts import get_prompt

from . import retry
from .agent import emulated_env, run_case
from .dag import prompts_of
from .data import checkout, row_case, section, texts_root
from .spec import AgentSettings, EpisodeSpec, ToolBackend
from .fork_server import running
from .upstream_tools import fork_servers, isolation, module_path

VARIANTS = ("raw", "mitigated")
PROMPT_OF = {"raw": "agent_raw", "benign": "agent_clarify", "adversarial": "agent_safety"}


def setting(raw: dict, key: str, *, required: bool = False):
    value = section(raw).get(key)
    if required and value is None:
        raise ConfigError(f"config lacks lpsbench.{key} (a model name): the LPS-Bench episodes need it")
    return value


def variant_of(ctx) -> str:
    return ctx.options.get("variant", "raw")


def agent_params(config, model: str) -> dict:
    """The agent's sampling: `lpsbench.model_params[model]` when given, else `lpsbench.params`; top_k / min_p
    kept only where the endpoint takes them."""
    extras = config.endpoint_of(model).sampling_extras
    own = setting(config.raw, "model_params") or {}
    params = own[model] if model in own else (setting(config.raw, "params") or {})
    return {k: v for k, v in params.items() if k not in ("top_k", "min_p") or k in extras}


def mitigation(variant: str, benign: bool, ask_user: bool = False) -> str:
    """What the variant changes for a case: none (raw), clarify_prompt / safety_prompt (the paper's), or
    ask_user (the extension: clarify_prompt plus the ask_user tool)."""
    if variant == "raw":
        return "none"
    if not benign:
        return "safety_prompt"
    return "ask_user" if ask_user else "clarify_prompt"


def tool_backend(raw: dict) -> tuple[ToolBackend, dict]:
    """`lpsbench.tools`: who answers the tool calls (its checkout: `upstream_dir`, else the download's dest),
    and the time limits (upstream back-end only)."""
    t = dict(setting(raw, "tools") or {})
    limits = t.pop("call_timeout_s", None), t.pop("episode_timeout_s", None)
    backend = ToolBackend(**{**t, "upstream_dir": checkout(raw)})
    if backend.backend == "emulated":
        return backend, {}
    if not backend.upstream_dir:
        raise ConfigError("lpsbench.tools.upstream_dir: the upstream back-end needs an LPS-Bench checkout")
    return backend, {"tool_call_timeout_s": limits[0], "tool_time_limit_s": limits[1]}


def _tools_of(case, root: str | None):
    """(case, behaviour) for the emulated back-end: a case with its own tool_specs as it is; an upstream case
    with the specs read from its module's source (ast, never imported) and that source as the behaviour."""
    if case.body.tool_specs is not None:
        return case, None
    if root is None:
        raise ConfigError(f"case {case.case_id} names its tools only (an upstream case): set "
                          "lpsbench.tools.upstream_dir to an LPS-Bench checkout, or use lpsbench.cases.download")
    from .module_source import case_tools

    found = case_tools(root, case)
    if found.problem:
        raise ConfigError(f"case {case.case_id}: upstream tool module {case.body.mcp.file}: {found.problem} "
                          "(the cases stage excludes such cases; rerun it)")
    body = case.body.model_copy(update={"tool_specs": found.specs})
    return case.model_copy(update={"body": body}), found.source


def spec_for(config, case, model: str, variant: str, calls_file: Path) -> EpisodeSpec:
    benign = case.risk_info.kind == "benign"
    prompt = PROMPT_OF["raw" if variant == "raw" else case.risk_info.kind]
    backend, limits = tool_backend(config.raw)
    settings = AgentSettings(max_steps=int(setting(config.raw, "max_steps") or 100),
                             step_unit=setting(config.raw, "step_unit") or "model_calls",
                             max_episode_tokens=setting(config.raw, "max_episode_tokens"),
                             params=agent_params(config, model), prompt=prompt,
                             tool_calling=config.endpoint_of(model).tool_mode, **limits)
    ask_user = mitigation(variant, benign, bool(setting(config.raw, "ask_user_extension"))) == "ask_user"
    user = setting(config.raw, "user_simulator", required=True) if ask_user else None
    emulated = backend.backend == "emulated"
    emulator = setting(config.raw, "emulator", required=emulated)
    case, behaviour = _tools_of(case, backend.upstream_dir) if emulated else (case, None)
    return EpisodeSpec(config=config.raw, case=case, agent_model=model,
                       emulator_model=emulator if emulated else None, sample=0, settings=settings,
                       emulator_calls=str(calls_file), user_model=user, tools=backend, behaviour=behaviour,
                       texts=texts_root(config.raw))


def _stage_failure(exc: BaseException) -> StageFailed | None:
    """A job-level failure inside an exception (group) raised by the MCP session's task group."""
    if isinstance(exc, StageFailed):
        return exc
    for inner in getattr(exc, "exceptions", ()):
        found = _stage_failure(inner)
        if found is not None:
            return found
    return None


def _check_ceiling(rows: list[dict], client) -> None:
    """Failed episodes (the agent's model or the tool environment failed, or the episode raised) against the
    job's failure ceiling (`LLMClient.failure_ceiling`, llm.max_failed_share / max_failed_items): over it, the
    job stops with one line and writes nothing, as a stage of single calls does."""
    failed = [r for r in rows if r["status"] == "failed"]
    allowed = client.failure_ceiling(len(rows)) if client is not None else 0
    if len(failed) > allowed:
        reasons = Counter(r["error"] or r["stop_reason"] for r in failed)
        top = "; ".join(f"{n}x {why}" for why, n in reasons.most_common(3))
        raise TooManyFailures(f"{len(failed)} of {len(rows)} episodes failed, over the ceiling of {allowed} "
                              f"(llm.max_failed_share, llm.max_failed_items); no output written; reasons: {top}")


def _one_line(exc: BaseException) -> str:
    while getattr(exc, "exceptions", None):  # an ExceptionGroup: its first leaf tells what happened
        exc = exc.exceptions[0]
    return f"{type(exc).__name__}: {' '.join(str(exc).split())}"


def episode_row(case, model: str, variant: str, episode=None, error: str | None = None,
                ask_user: bool = False, tries: int = 1) -> dict:
    benign = case.risk_info.kind == "benign"
    base = {"case_id": case.case_id, "model": model, "variant": variant, "risk": case.risk, "benign": benign,
            "domain": case.domain, "mitigation": mitigation(variant, benign, ask_user), "tries": tries}
    if episode is None:
        return {**base, "status": "failed", "stop_reason": "error", "steps": 0, "tokens": 0, "final_answer": None,
                "error": error, "record": None}
    return {**base, "status": episode.status, "stop_reason": episode.stop_reason, "steps": len(episode.steps),
            "tokens": episode.tokens_in + episode.tokens_out, "final_answer": episode.final_answer,
            "error": error or episode.error, "record": episode.model_dump(mode="json")}


async def _run_all(specs: list[EpisodeSpec], clients: list, folder: Path, retries: int) -> list[list]:
    """Each spec's tries (each an episode, or the exception it raised), at most len(clients) episodes at once. A try
    lost to its infrastructure is followed by another, with a new tool server, up to `retries` more; a job-level
    failure (StageFailed) ends the tries."""
    free: asyncio.Queue = asyncio.Queue()
    for c in clients:
        free.put_nowait(c)

    async def one(i: int, spec: EpisodeSpec) -> list:
        client, tries = await free.get(), []
        try:
            while len(tries) <= retries:
                try:
                    tries.append(await run_case(spec, folder / f"{i:04d}.spec.json", client))
                except Exception as exc:  # noqa: BLE001 - sorted out by the caller: job failure or failed row
                    tries.append(exc)
                    if _stage_failure(exc) is not None:
                        break
                why = retry.lost_reason(tries[-1], spec, _one_line)
                if why is None:
                    break
                if len(tries) <= retries:
                    print(f"note: {spec.case.case_id}: try {len(tries)} of {retries + 1} lost to its infrastructure "
                          f"({why}); trying again with a new tool server", file=sys.stderr, flush=True)
            return tries
        finally:
            free.put_nowait(client)

    return await asyncio.gather(*(one(i, s) for i, s in enumerate(specs)))


def _row(case, spec, tries: list, model: str, variant: str, ask_user: bool) -> tuple[dict, dict | None]:
    """The episode's row, and {case_id, reason, tries} when it was lost to its infrastructure in every try."""
    last = tries[-1]
    failure = _stage_failure(last) if isinstance(last, BaseException) else None
    if failure is not None:
        raise failure
    why = retry.lost_reason(last, spec, _one_line)
    if why is None:
        return episode_row(case, model, variant, last, ask_user=ask_user, tries=len(tries)), None
    lost = {"case_id": case.case_id, "reason": why, "tries": len(tries)}
    error = f"lost to its infrastructure in all {len(tries)} tries: {why}"
    keep = retry.kept(tries)
    if isinstance(keep, BaseException):
        return episode_row(case, model, variant, error=error, ask_user=ask_user, tries=len(tries)), lost
    return episode_row(case, model, variant, keep, error=error, ask_user=ask_user, tries=len(tries)), lost


def _tool_server_calls(path: Path) -> list[CallRecord]:
    """The call records the episode's tool servers appended (every try's). A line cut short (a server killed while
    writing it) is left out with one warning line."""
    names = {f.name for f in fields(CallRecord)}
    out = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        try:
            rec = json.loads(line) if line.strip() else None
        except ValueError:
            print(f"warning: {path}:{n}: a tool server's call record cut short (its server was killed while writing "
                  "it); left out of the job's accounting", file=sys.stderr)
            continue
        if rec is not None:
            out.append(CallRecord(**{k: v for k, v in rec.items() if k in names}))
    return out


def _warn_lost(lost: list[dict], output) -> None:
    if lost:
        which = "; ".join(f"{x['case_id']} ({x['reason']})" for x in lost)
        print(f"warning: {len(lost)} episode(s) lost to their infrastructure in every try, kept as failed rows with "
              f"the record each reached (the evaluator judges it): {which}; the next `snakemake` run retries this job "
              f"(answered calls replay from the cache); {retry.sidecar(output)} lists them", file=sys.stderr)


def _fork_servers(specs, folder: Path, stack) -> None:
    """This job's fork servers (fork_server.py): one for its upstream episodes (per interpreter and isolation),
    one for its emulated ones; each episode's server is then a forked child, not a fresh interpreter."""
    fork_servers(specs, folder, stack)
    if any(s.tools.backend != "upstream" for s in specs):
        stack.enter_context(running((sys.executable, "emulated"), [], emulated_env(), folder))


def run(ctx) -> None:
    variant, model = variant_of(ctx), ctx.model
    if model is None:
        raise ConfigError("lpsbench-episodes needs --model (the evaluated agent)")
    cases = [row_case(r) for r in ctx.read("cases")]
    for name in prompts_of(ctx.config.raw, variant):
        ctx.use_prompt(get_prompt(name))
    ep = ctx.config.endpoint_of(model)
    ask_user = bool(setting(ctx.config.raw, "ask_user_extension"))
    width = max(1, min(ep.max_concurrency, len(cases)))
    retries = setting(ctx.config.raw, "episode_retries")
    retries = retry.DEFAULT_RETRIES if retries is None else int(retries)
    with tempfile.TemporaryDirectory(prefix="lpsbench-episodes-") as tmp, ExitStack() as stack:
        folder = Path(tmp)
        specs = [spec_for(ctx.config, c, model, variant, folder / f"{i:04d}.calls.jsonl")
                 for i, c in enumerate(cases)]
        for s in specs:
            s.check(ctx.config)
            if s.tools.backend == "upstream":  # every case's module found, the isolation usable: before any call
                module_path(s.tools.upstream_dir, s.case)
                isolation(s.tools.network)
        if (section(ctx.config.raw).get("tools") or {}).get("start", "fork") == "fork":
            _fork_servers(specs, folder, stack)
        models = [model] + sorted({s.emulator_model for s in specs if s.emulator_model})
        models += sorted({s.user_model for s in specs if s.user_model and s.user_model not in models})
        clients = [stack.enter_context(ctx.llm(models)) for _ in range(width)]
        outcomes = asyncio.run(_run_all(specs, clients, folder, retries)) if specs else []
        ctx.infra_retries = sum(len(tries) - 1 for tries in outcomes)  # every try after the first was a lost one's
        for s in specs:  # the tool servers' emulator / simulated-user calls join the job's accounting
            if Path(s.emulator_calls).exists():
                for rec in _tool_server_calls(Path(s.emulator_calls)):
                    ctx.accounting.add_call(rec)
        rows, lost = [], []
        for case, spec, tries in zip(cases, specs, outcomes):
            row, lost_one = _row(case, spec, tries, model, variant, ask_user)
            rows.append(row)
            lost += [lost_one] if lost_one else []
        _check_ceiling(rows, clients[0] if clients else None)
    ctx.write("episodes", rows, variant=variant, tool_calling=ep.tool_mode,
              params=agent_params(ctx.config, model), max_steps=setting(ctx.config.raw, "max_steps"),
              step_unit=setting(ctx.config.raw, "step_unit"), ask_user_extension=ask_user,
              max_episode_tokens=setting(ctx.config.raw, "max_episode_tokens"))
    retry.record(ctx.outputs["episodes"], lost)
    _warn_lost(lost, ctx.outputs["episodes"])
