"""`python -m aura summary`: one line per stage from the job summaries the stages wrote.

Each job writes <logs>/summary/<stage>/<job>.json when it ends (StageContext.finish). A job counts
when it is current: it succeeded and its outputs exist, or it failed (its outputs were not written).
Items ok / unparsed / failed are the statuses of the rows a job wrote (where its rows carry them), so the line
says what the outputs hold; `cache_repaired` counts broken cache entries that were asked again.
The Snakefile's onsuccess/onerror handlers print these lines at the end of every `snakemake` run, so
a run that finished with failed or unparsed items says so. They pass `--since` (when the Snakefile was read):
the lines first say what this invocation ran (`aura summary (this run):`, then an `aura summary:` line per stage
it ran; a rebuild of one figure says it made no model call), then, labelled `aura totals`, every current job of
the run folder, earlier invocations included. Tokens: tokens_out is the completion tokens billed
as output, tokens_reasoning the part of them that was hidden reasoning (as the servers reported it; a job
summary written before reasoning tokens were recorded counts 0). `retries` are the LLM layer's (a call tried
again); `infra_retries`, said when there are some, the tries a stage repeated because its infrastructure failed
(an LPS-Bench episode whose tool server died).
`reproduction_lines` adds one line per enabled family whose manifest names a verdict table (`reproduction`,
a layout key) that the run produced: its verdict's summary line (aura.stats.verdict.summary_line).
"""
from __future__ import annotations

import json
from pathlib import Path

KEYS = ("ok", "unparsed", "failed")


def _current(summary: dict) -> bool:
    if summary.get("status") == "failed":
        return True
    return all(Path(p).exists() for p in summary.get("outputs", []))


def _item_counts(summary: dict) -> dict[str, int]:
    """ok / unparsed / failed of a model-calling job: from the rows it wrote where they carry those statuses (a
    stage that reads an answer itself may find it unparsed where the LLM layer saw a whole answer), else the
    LLM layer's own item counts (a job stopped before writing)."""
    rows, llm = summary.get("row_statuses") or {}, summary.get("llm") or {}
    source = rows if any(k in rows for k in KEYS) else llm
    return {k: int(source.get(k) or 0) for k in KEYS}


def collect(logs: str | Path, since: float | None = None) -> dict[str, dict]:
    """Per stage (in the order the stages first finished): totals over its current jobs (with `since`: only the
    jobs that finished at or after that time, this invocation's)."""
    jobs = []
    for path in sorted(Path(logs, "summary").glob("*/*.json")):
        try:
            s = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue  # a summary is a report: an unreadable one is skipped, never fatal
        if isinstance(s, dict) and "stage" in s and _current(s) and (since is None or s.get("finished", 0) >= since):
            jobs.append(s)
    stages: dict[str, dict] = {}
    for s in sorted(jobs, key=lambda s: s.get("finished", 0)):
        t = stages.setdefault(s["stage"], {"jobs": 0, "failed_jobs": [], "llm_jobs": 0, "not_applicable": 0,
                                            "calls": 0, "cache_hits": 0, "cache_repaired": 0, "retries": 0,
                                            "infra_retries": 0, "tokens_out": 0,
                                            "tokens_reasoning": 0, "cost_usd": 0.0, "cpu_s": 0.0,
                                            "outputs_with_failures": [], **{k: 0 for k in KEYS}})
        t["jobs"] += 1
        t["not_applicable"] += int(s.get("not_applicable") or 0)
        t["infra_retries"] += int(s.get("infra_retries") or 0)
        if s.get("status") == "failed":
            t["failed_jobs"].append(f"{s.get('label')}: {s.get('error')}")
        llm = s.get("llm")
        if llm:
            t["llm_jobs"] += 1
            items = _item_counts(s)
            for k in KEYS:
                t[k] += items[k]
            for k in ("calls", "cache_hits", "cache_repaired", "retries", "tokens_out", "tokens_reasoning", "cost_usd",
                      "cpu_s"):
                t[k] += llm.get(k) or 0
            if s.get("status") != "failed" and (items["failed"] or items["unparsed"]):
                t["outputs_with_failures"].extend(s.get("outputs", [])[:1])
    return stages


def lines(stages: dict[str, dict], prefix: str = "aura summary") -> list[str]:
    out = []
    for stage, t in stages.items():
        if not t["llm_jobs"] and not t["failed_jobs"] and not t["infra_retries"]:
            continue  # a stage without model calls that succeeded has nothing to report
        repaired = f" cache_repaired={t['cache_repaired']}" if t["cache_repaired"] else ""
        infra = f" infra_retries={t['infra_retries']}" if t["infra_retries"] else ""
        line = (f"{prefix}: {stage} ({t['jobs']} job{'s' if t['jobs'] != 1 else ''}): items ok={t['ok']} "
                f"unparsed={t['unparsed']} failed={t['failed']} n/a={t['not_applicable']}; calls={t['calls']} "
                f"cache_hits={t['cache_hits']}{repaired} retries={t['retries']}{infra} tokens_out={t['tokens_out']} "
                f"tokens_reasoning={t['tokens_reasoning']} cost_usd={t['cost_usd']:.4f}")
        if t["failed_jobs"]:
            line += f"; {len(t['failed_jobs'])} job(s) FAILED, first: {t['failed_jobs'][0]}"
        if t["outputs_with_failures"]:
            line += f"; failed/unparsed items are listed with their reason in {t['outputs_with_failures'][0]}"
            if len(t["outputs_with_failures"]) > 1:
                line += f" and {len(t['outputs_with_failures']) - 1} more output(s)"
        out.append(line)
    return out


def invocation_lines(logs: str | Path, since: float) -> list[str]:
    """This invocation's lines (jobs finished since `since`), then the run folder's totals, each labelled."""
    now = collect(logs, since)
    calls = sum(t["calls"] for t in now.values())
    hits = sum(t["cache_hits"] for t in now.values())
    jobs = sum(t["jobs"] for t in now.values())
    head = (f"aura summary (this run): {jobs} stage job(s) finished, {calls} model call(s), {hits} cache hit(s)"
            + ("" if calls or hits else ": no model call"))
    folder = lines(collect(logs), prefix="aura totals")
    if folder == lines(now, prefix="aura totals"):  # the folder's lines are this run's: said once
        return [head, *lines(now), "aura totals (the run folder): the same as above"]
    return [head, *lines(now), *(["aura totals (the run folder, every current job of this and earlier runs):", *folder]
                                 if folder else [])]


def end_of_run_lines(raw: dict, since: float | None = None) -> list[str]:
    """What `aura summary` prints: this invocation's lines and the folder's totals (`since` given) or the folder's
    lines alone, then the reproduction lines. The Snakefile calls it in its own process at the end of a run (a
    new interpreter importing the package cost a one-figure rebuild ~0.8 s of its ~5 s)."""
    logs = raw["paths"]["logs"]
    head = (invocation_lines(logs, since) if since is not None
            else lines(collect(logs)) or ["aura summary: no model calls recorded"])
    return [*head, *reproduction_lines(raw)]


def print_end_of_run(raw: dict, since: float) -> None:
    """The Snakefile's onsuccess / onerror: `end_of_run_lines` on stderr. A report: whatever goes wrong here is said
    in one line and never changes the run's outcome."""
    import sys

    try:
        print("\n".join(end_of_run_lines(raw, since)), file=sys.stderr)
    except Exception as exc:  # noqa: BLE001 - the run's outcome is Snakemake's, not this report's
        print(f"aura summary: not written ({type(exc).__name__}: {exc})", file=sys.stderr)


def reproduction_lines(raw: dict) -> list[str]:
    """One line per enabled family with a produced verdict table (its manifest's `reproduction` layout key)."""
    import pandas as pd

    from ..families import enabled
    from ..stats.verdict import summary_line
    from .layout import layout

    keys = layout(raw)
    out = []
    for family in enabled(raw):
        path = Path(keys[family.reproduction]) if family.reproduction else None
        if path is not None and path.is_file():
            try:
                out.append(f"aura summary: reproduction: {summary_line(family.name, pd.read_csv(path), rehearsal=bool(raw.get('rehearsal')))}")
            except (ValueError, KeyError, pd.errors.EmptyDataError):
                out.append(f"aura summary: reproduction: {family.name}: {path} is not a verdict table")
    return out
