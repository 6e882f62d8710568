"""Episodes lost to their infrastructure: which tries are, and how a plain `snakemake` rerun retries them.

A try of an episode is *lost to its infrastructure* when something other than the agent ended it: the try raised
(its tool server could not start, or died before the tools were listed), its tool server died mid-episode
(``server_died``), or, on the emulated back-end, the emulator's or simulated user's call failed after the LLM
layer's own retries (``tool_failed`` with no time limit set: only the upstream back-end has time limits, and a call
past one is the benchmark's rule, not an infrastructure failure). The agent's own model failing (``model_failed``)
is not: the LLM layer counts it as a failed item of the job.

The episodes stage tries a lost episode again, ``lpsbench.episode_retries`` more times, each with a new tool
server; the calls answered before replay from the cache, so nothing is paid twice. One still lost is kept with the
furthest record its tries reached (most steps): a ``failed`` row that the evaluator judges (unsafe, else
execution_failed with its stop reason). The tries repeated are counted: the row's ``tries``, and the job's
``infra_retries`` (its summary file, its SUMMARY line and the ``aura summary`` line), apart from the LLM layer's
``retries``.

A plain rerun retries it. The stage keeps a sidecar beside its output, ``<episodes file>.retry.json`` =
``{"lossy_runs": n, "lost": [{case_id, reason, tries}]}``, n = how many of the job's runs ended with episodes lost.
The rule's params carry n (:func:`params_value`): a run that loses episodes raises n, Snakemake sees the params
changed and reruns the job; a run that loses none leaves n, so the run after it has nothing to do. The evaluate
stage keeps one the same way for evaluator calls that failed (its endpoint down): the next run asks them again.
"""
from __future__ import annotations

import json
from pathlib import Path

from aura.io import atomic_write_json

DEFAULT_RETRIES = 2  # lpsbench.episode_retries (schema default)


def sidecar(output) -> Path:
    return Path(f"{output}.retry.json")


def lossy_runs(output) -> int:
    """n of the sidecar beside `output`; 0 when there is none or it cannot be read (the job then reruns once)."""
    try:
        n = json.loads(sidecar(output).read_text(encoding="utf-8")).get("lossy_runs", 0)
    except (OSError, ValueError, AttributeError):
        return 0
    return n if isinstance(n, int) and n >= 0 else 0


def params_value(base: str, output) -> str:
    """The episodes rule's `episode` param: the settings' hash, plus n once a run has lost episodes (a job that
    never lost any keeps the bare hash, so its params are what they were before this sidecar existed)."""
    n = lossy_runs(output)
    return f"{base} lossy_runs={n}" if n else base


def record(output, lost: list[dict]) -> None:
    """After a run: n + 1 and the lost episodes when there are some; else the same n and none lost (no file as long
    as no run lost any)."""
    path, n = sidecar(output), lossy_runs(output)
    if lost or path.exists():
        atomic_write_json(path, {"lossy_runs": n + (1 if lost else 0), "lost": lost})


def lost_reason(outcome, spec, one_line) -> str | None:
    """Why a try (an agent.Episode, or the exception it raised) was lost to its infrastructure; None when the
    episode ended by the agent's doing or by a rule of the benchmark. `one_line` formats an exception."""
    if isinstance(outcome, BaseException):
        return one_line(outcome)
    limited = spec.settings.tool_call_timeout_s is not None or spec.settings.tool_time_limit_s is not None
    if outcome.stop_reason == "server_died" or (outcome.stop_reason == "tool_failed" and not limited):
        return outcome.error or outcome.stop_reason
    return None


def kept(tries: list):
    """The try to keep of an episode lost in every try: the furthest record (most steps; the later on a tie), else
    the last exception (no try had a record)."""
    records = [t for t in tries if not isinstance(t, BaseException)]
    if not records:
        return tries[-1]
    return max(reversed(records), key=lambda ep: len(ep.steps))
