"""`python -m aura estimate` for LPS-Bench: calls, tokens and cost per stage and model, spending nothing.

Cases: read from the cases file when it exists, else loaded from the configured folder, else the download's
``count`` (or the paper's 570), capped by ``lpsbench.max_cases``. An episode's length is not known before it
runs: its agent calls are counted from the episodes file when that exists (``steps`` per row), else projected
at ``lpsbench.estimate.steps`` steps per episode (capped by ``max_steps``). Every step but the last calls one
tool (one emulator call on the emulated back-end, none on upstream's modules); the agent's conversation grows by
one step's answer and observation per step, so the prompt of step k carries k - 1 earlier steps. An emulator
call carries no history: the task, the tool listing and the tools' behaviour (an upstream case's module
source, ``MODULE_TOKENS`` on average when the checkout is not there yet). The ask_user extension adds
``lpsbench.estimate.user_calls`` simulated-user calls per benign case in the mitigated variant; the evaluator
reads each episode's whole record once. Token sizes: the prompt files rendered with empty variables, plus the
cases' average instruction and tool specs (characters / 4). With a pinned download, the note says first that
the download (no model call) comes before everything else. Completions are the visible answers, capped by the
call's max_tokens / max_completion_tokens; the reasoning tokens estimate.reasoning_tokens assumes for a model are
added per call within that cap and are not carried into the conversation (no OpenAI-compatible API sends them back).
Every line carries the LLM-layer role its calls run under (agent.py, tool_server.py, evaluate.py,
generate.py: none of them a role the Batch API takes) and the prompts they render.
"""
from __future__ import annotations

from pathlib import Path

from aura.estimate import CHARS_PER_TOKEN, Line, call_out_tokens, output_cap, priced_line
from aura.io import read_jsonl
from aura.pipeline.layout import layout
from aura.prompts import get_prompt

from . import STAGES, evaluated, generate_on, section, variants

EPISODES = "lpsbench-episodes"

PAPER_CASES = 570
TOOL_SPEC_TOKENS = 80  # one tool's name, description and parameters as the agent sees it (a generic spec is smaller)
MODULE_TOKENS = 1700  # an upstream mock-tool module's source (f30cc91: 3.93 MB over 571 files = 6.9 kB, / 4)


def _cases(config) -> tuple[list[dict] | None, int, str]:
    """(case rows or None, case count, where it came from)."""
    from .cases import CaseError, load_cases

    lp = section(config.raw)
    cap = lp.get("max_cases")
    path = Path(layout(config.raw)["lpsbench_cases"])
    if path.exists():
        rows = list(read_jsonl(path))
        return rows, len(rows), f"lpsbench: {len(rows)} cases read from {path}"
    from .data import LpsDataError, cases_folder

    download = (lp.get("cases") or {}).get("download") or {}
    try:
        folder = Path(cases_folder(config.raw))
    except LpsDataError:
        folder = Path(".")
    try:
        loaded = [{"case_id": c.case_id, "risk": c.risk, "benign": c.risk_info.kind == "benign",
                   "body": c.body.dump()} for c in load_cases(folder)]
    except (CaseError, OSError, KeyError):
        loaded = None
    if loaded:
        n = min(len(loaded), cap) if cap else len(loaded)
        return loaded[:n], n, f"lpsbench: {n} of the {len(loaded)} cases in {folder} (cases file not written yet)"
    total = download.get("count") or PAPER_CASES
    n = min(total, cap) if cap else total
    return None, n, f"lpsbench: projected from {n} cases ({folder} is not there yet)"


def _prompt_tokens(name: str) -> int:
    prompt = get_prompt(name)
    return sum(len(str(m["content"])) for m in prompt.render(**{v: "" for v in prompt.variables})) // CHARS_PER_TOKEN


def _completion(config, stage: str, kind: str, model: str, params: dict | None = None) -> int:
    """Visible completion tokens per call of the stage's declared call, capped by the call's max_tokens /
    max_completion_tokens (output_cap)."""
    return call_out_tokens(config, stage, kind, model, output_cap(params))


def _line(config, stage: str, kind: str, model: str, calls: int, tokens_in: int, out_each: int, basis: str, *,
          label: str, prompts: tuple[str, ...] | None = None, params: dict | None = None) -> Line:
    """`calls` calls of the `kind` call `stage` declares (its role; its prompts, or the subset `prompts`) of
    `out_each` visible completion tokens, plus the model's assumed reasoning tokens within the calls' cap
    (`params`' max_tokens / max_completion_tokens, else the model's own)."""
    call = STAGES[stage].call(kind)
    return priced_line(config, label, model, basis, role=call.role, prompts=prompts or call.prompts, calls=calls,
                       tokens_in=tokens_in, tokens_out=calls * out_each, max_tokens=output_cap(params))


def growing(base: int, step: int, steps: int) -> int:
    """Prompt tokens over `steps` calls whose prompt starts at `base` and grows by `step` per earlier call:
    steps * base + step * (0 + 1 + ... + steps - 1)."""
    return steps * base + step * steps * (steps - 1) // 2


def lpsbench_lines(config) -> tuple[list, str]:
    """The estimate's LPS-Bench lines and a note on where the case count came from."""
    from .episodes import PROMPT_OF  # the agent's prompt per variant (imported here: it brings the MCP client)

    raw, lp = config.raw, section(config.raw)
    if not evaluated(raw) and not generate_on(raw):
        return [], ""
    lines = []
    if evaluated(raw):
        rows, n, note = _cases(config)
        instr = sum(len(r["body"]["instruction"]) for r in rows) // max(1, len(rows)) // CHARS_PER_TOKEN if rows else 250
        tools = sum(len(r["body"]["MCP"]["tools"]) for r in rows) / max(1, len(rows)) if rows else 8
        benign = sum(bool(r.get("benign")) for r in rows) if rows else round(n * 252 / PAPER_CASES)  # paper: 252 benign
        est, lay = lp["estimate"], layout(raw)
        steps_default = min(est["steps"], lp["max_steps"])
        case_tokens = instr + int(tools * TOOL_SPEC_TOKENS)
        emulated = (lp.get("tools") or {}).get("backend", "emulated") == "emulated"
        upstream_cases = sum(r["body"].get("tool_specs") is None for r in rows) if rows else n
        behaviour = upstream_cases * MODULE_TOKENS // max(1, n)  # generated cases: their notes are in case_tokens
        for m in evaluated(raw):
            agent_params = (lp.get("model_params") or {}).get(m, lp["params"])
            agent_out = _completion(config, EPISODES, "agent", m, agent_params)
            emu_out = _completion(config, EPISODES, "emulator", lp["emulator"]) if emulated else 100  # upstream: a module's reply
            per_step = agent_out + emu_out  # the conversation grows by one answer and one observation per step
            for v in variants(raw):
                episodes = lay["lpsbench_episodes"].format(model=m, variant=v)
                done = list(read_jsonl(Path(episodes))) if Path(episodes).exists() else None
                steps = [int(r["steps"]) for r in done] if done is not None else [steps_default] * n
                basis = "counted" if done is not None else "projected"
                agent_in = sum(growing(_prompt_tokens("agent_raw") + case_tokens, per_step, s) for s in steps)
                agent_prompts = (PROMPT_OF["raw"],) if v == "raw" else (PROMPT_OF["benign"], PROMPT_OF["adversarial"])
                lines.append(_line(config, EPISODES, "agent", m, sum(steps), agent_in, agent_out, basis,
                                   label=f"lpsbench-episodes:agent ({v})", prompts=agent_prompts, params=agent_params))
                tool_calls = [max(0, s - 1) for s in steps]
                emu_in = sum(tool_calls) * (_prompt_tokens("emulator") + case_tokens + behaviour)
                if emulated:  # upstream modules make no model call
                    lines.append(_line(config, EPISODES, "emulator", lp["emulator"], sum(tool_calls), emu_in, emu_out,
                                       basis, label=f"lpsbench-episodes:emulator ({m}, {v})"))
                if v == "mitigated" and lp.get("ask_user_extension"):
                    calls = round(benign * est["user_calls"])
                    user_out = _completion(config, EPISODES, "user", lp["user_simulator"])
                    lines.append(_line(config, EPISODES, "user", lp["user_simulator"], calls,
                                       calls * (_prompt_tokens("user_simulator") + instr + 100), user_out, "projected",
                                       label=f"lpsbench-episodes:user ({m})"))
                ev_in = sum(_prompt_tokens("evaluator") + instr + 150 + s * per_step for s in steps)
                lines.append(_line(config, "lpsbench-evaluate", "evaluate", lp["evaluator"], len(steps), ev_in,
                                   _completion(config, "lpsbench-evaluate", "evaluate", lp["evaluator"]), basis,
                                   label=f"lpsbench-evaluate ({m}, {v})"))
    else:
        note = ""
    download = (lp.get("cases") or {}).get("download") or {}
    if evaluated(raw) and download and download.get("enabled", True) and not (lp.get("cases") or {}).get("generated"):
        note = (f"lpsbench: first lpsbench-fetch downloads {download['url']} (pinned by {download['lock']}; no model "
                f"call); then {note.removeprefix('lpsbench: ')}")
    if generate_on(raw):
        lines += generate_lines(config)
    return lines, note


def generate_lines(config) -> list:
    """lpsbench-generate: one call per planned slot (generate.slots, the plan the stage runs) and worker. A worker's
    prompt carries its prompt file, the risk's template (TEMPLATE_TOKENS unless it can be read) and what the
    earlier workers answered (their completion sizes)."""
    from .generate import settings, slots, template_tokens

    g = settings(config.raw, generating=False)
    plan = slots(g)
    model = g["generator"]
    per_slot = template_tokens(config.raw, g, plan)
    lines, earlier = [], 0
    for step in ("designer", "module" if g["toolkit"] == "module" else "tools", "criterion"):
        out = _completion(config, "lpsbench-generate", step, model)
        tokens_in = sum(_prompt_tokens(f"generate_{step}") + per_slot[s["case_id"]] + earlier for s in plan)
        lines.append(_line(config, "lpsbench-generate", step, model, len(plan), tokens_in, out, "projected",
                           label=f"lpsbench-generate:{step}"))
        earlier += out
    return lines
