"""Per-call records, running totals, progress a person can follow, one-line job summary."""
from __future__ import annotations

import resource
import sys
import time
from dataclasses import asdict, dataclass, field

from tqdm import tqdm

from ..io import write_jsonl


@dataclass
class CallRecord:
    """One HTTP call (or cache hit). Never holds an API key or a header."""

    key: str
    role: str
    model: str
    model_id: str
    endpoint: str
    item_id: str
    prompt_name: str
    prompt_sha256: str
    purpose: str  # "answer" or "repair"
    status: str  # ok | failed
    cache_hit: bool
    tokens_in: int = 0
    tokens_out: int = 0  # completion tokens billed as output: reasoning tokens included (types.usage_counts)
    tokens_cached: int | None = None  # prompt tokens the server reused, not evaluated (when it says)
    tokens_reasoning: int | None = None  # of tokens_out, hidden reasoning (usage.completion_tokens_details), when said
    timings: dict | None = None  # server-reported timings (llama.cpp: prompt_n/_ms, predicted_n/_ms, total_ms)
    latency_s: float = 0.0
    attempts: int = 0
    cost_usd: float = 0.0
    finish_reason: str | None = None
    error: str | None = None
    started_at: float = field(default_factory=time.time)  # when the call was asked for (before any queue)
    answered_at: float | None = None  # when its answer arrived (wall clock): it was sent latency_s before
    batch_id: str | None = None  # answered through this Batch API batch (aura.llm.batch), priced at its discount


class Accounting:
    """Totals over a job; prints progress (tqdm on a terminal, a line every few seconds in a log)."""

    def __init__(self, label: str = "llm", stream=None, interval_s: float = 10.0):
        self.label = label
        self.records: list[CallRecord] = []
        self.items_total = 0
        self.items_done = 0
        self.outcomes = {"ok": 0, "unparsed": 0, "failed": 0}
        self.failed_items: list[tuple[str, str]] = []  # (item_id, reason) of each failed item
        self.unparsed_items: list[tuple[str, str]] = []
        self.calls = self.cache_hits = self.tokens_in = self.tokens_out = 0
        self.cache_repaired = 0  # broken cache entries found (and asked again)
        self.tokens_reasoning = 0  # of tokens_out: the reasoning tokens the calls' servers reported
        self.cost_usd = 0.0
        self.started = time.monotonic()
        self.cpu_started = _cpu_s()  # a job server runs many jobs in one process: a job's CPU is the difference
        self._stream = stream or sys.stderr
        self._interval = interval_s
        self._last_print = 0.0
        self._bar: tqdm | None = None

    # progress -----------------------------------------------------------------------------
    def start(self, total: int, desc: str | None = None) -> None:
        """A batch of `total` requests begins (one `run` call: `desc` is its role:model): progress lines name the
        batch and count its requests, then the job's so far (a job's later batches add to its total)."""
        self.items_total += total
        self._batch = (desc or self.label, self.items_done, total)
        if self._stream.isatty():
            self._bar = tqdm(total=self.items_total, desc=desc or self.label, file=self._stream, mininterval=0.5)
        else:
            self._emit(force=True)

    def add_call(self, rec: CallRecord) -> None:
        self.records.append(rec)
        if rec.cache_hit:
            self.cache_hits += 1
        else:
            self.calls += 1
        self.tokens_in += rec.tokens_in
        self.tokens_out += rec.tokens_out
        self.tokens_reasoning += rec.tokens_reasoning or 0
        self.cost_usd += rec.cost_usd

    def item_done(self, outcome: str, item_id: str | None = None, reason: str | None = None) -> None:
        self.items_done += 1
        self.outcomes[outcome] = self.outcomes.get(outcome, 0) + 1
        if outcome == "failed":
            self.failed_items.append((item_id or "?", reason or "unknown"))
        elif outcome == "unparsed":
            self.unparsed_items.append((item_id or "?", reason or "unknown"))
        if self._bar is not None:
            self._bar.update(1)
            self._bar.set_postfix_str(self._postfix(), refresh=False)
        else:
            self._emit()

    def recount(self, item_id: str, before: str, after: str, reason: str | None = None) -> None:
        """An item counted as `before` ended as `after` (re-asked in a later round)."""
        self.outcomes[before] -= 1
        self.outcomes[after] = self.outcomes.get(after, 0) + 1
        lists = {"failed": self.failed_items, "unparsed": self.unparsed_items}
        for i, (iid, _) in enumerate(lists.get(before, [])):
            if iid == item_id:
                del lists[before][i]
                break
        if after in lists:
            lists[after].append((item_id, reason or "unknown"))

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def _postfix(self) -> str:
        return (
            f"calls={self.calls} hits={self.cache_hits} tok={self.tokens_in}+{self.tokens_out} "
            f"${self.cost_usd:.4f}"
        )

    def _emit(self, force: bool = False) -> None:
        now = time.monotonic()
        if force or now - self._last_print >= self._interval or self.items_done == self.items_total:
            self._last_print = now
            desc, base, total = getattr(self, "_batch", (self.label, 0, self.items_total))
            print(f"[{self.label}] {desc}: {min(self.items_done - base, total)}/{total} requests (job: "
                  f"{self.items_done} so far) {self._postfix()}", file=self._stream, flush=True)

    # output -------------------------------------------------------------------------------
    def summary(self) -> str:
        wall = time.monotonic() - self.started
        o = self.outcomes
        return (
            f"SUMMARY {self.label}: requests={self.items_done} ok={o.get('ok', 0)} unparsed={o.get('unparsed', 0)} "
            f"failed={o.get('failed', 0)} calls={self.calls} cache_hits={self.cache_hits} "
            f"tokens_in={self.tokens_in} tokens_out={self.tokens_out} tokens_reasoning={self.tokens_reasoning} "
            f"cost_usd={self.cost_usd:.4f} wall_s={wall:.1f} cpu_s={self.cpu_s():.1f}"
        )

    def cpu_s(self) -> float:
        """The job's CPU since it started: its process and the children it has waited for."""
        return _cpu_s() - self.cpu_started

    def totals(self) -> dict:
        """What the job's summary file records (see pipeline.context.StageContext.finish)."""
        return {
            "items": self.items_done, "items_asked": self.items_total, **{k: self.outcomes.get(k, 0) for k in
                                                                          ("ok", "unparsed", "failed")},
            "calls": self.calls, "cache_hits": self.cache_hits, "cache_repaired": self.cache_repaired, "retries": sum(max(0, r.attempts - 1) for r in self.records),
            "tokens_in": self.tokens_in, "tokens_out": self.tokens_out, "tokens_reasoning": self.tokens_reasoning,
            "cost_usd": round(self.cost_usd, 6), "cpu_s": round(self.cpu_s(), 3),
            "failed_items": [{"item_id": i, "reason": r} for i, r in self.failed_items],
            "unparsed_items": [{"item_id": i, "reason": r} for i, r in self.unparsed_items],
        }

    def write_records(self, path) -> None:
        """The call log (`*.calls.jsonl`): one record per call, every CallRecord field (tokens_reasoning too)."""
        write_jsonl(path, (asdict(r) for r in self.records))


def _cpu_s() -> float:
    """The job's CPU so far: its process and the children it has waited for (tool servers, a local server)."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime
