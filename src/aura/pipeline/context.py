"""StageContext: what one Snakemake job (stage, model, shard) needs, and how it writes outputs."""
from __future__ import annotations

import re
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Iterable

from ..config import Config, UserError
from ..io import atomic_write_json, canonical_json, read_jsonl, sha256_text, write_jsonl
from ..llm.accounting import Accounting
from ..prompts import Prompt
from ..provenance import provenance, write_provenance

if TYPE_CHECKING:
    from ..llm import LLMClient


def shard_of(item_id: str, n_shards: int) -> int:
    """Stable assignment of an item to a shard, independent of row order."""
    return int(sha256_text(item_id)[:12], 16) % n_shards


@dataclass
class StageContext:
    stage: str
    config: Config
    inputs: dict[str, Path]
    outputs: dict[str, Path]
    model: str | None = None
    judge: str | None = None
    shard: int = 0
    n_shards: int = 1
    calls_log: Path | None = None
    options: dict[str, str] = field(default_factory=dict)
    prompts_used: list[Prompt] = field(default_factory=list)
    models_used: list[str] = field(default_factory=list)
    accounting: Accounting | None = None
    not_applicable: int = 0  # items the stage did not ask about (e.g. rollouts with nothing to judge)
    row_statuses: Counter = field(default_factory=Counter)  # `status` of the rows written
    infra_retries: int = 0  # tries repeated because the infrastructure failed (e.g. a tool server died), not the LLM

    # inputs -------------------------------------------------------------------------------
    def read(self, name: str) -> list[dict]:
        """The rows of an input JSONL file; a line that is not JSON (a cut-off or hand-edited file) is one
        line naming the file and line (UserError), not a traceback."""
        try:
            return list(read_jsonl(self.inputs[name]))
        except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
            raise UserError(" ".join(str(exc).split())) from None

    def in_shard(self, rows: Iterable[dict], key: str = "item_id") -> list[dict]:
        return [r for r in rows if shard_of(r[key], self.n_shards) == self.shard]

    # LLM ----------------------------------------------------------------------------------
    @property
    def label(self) -> str:
        return f"{self.stage}" + (f":{self.model}" if self.model else "") + (
            f":{self.judge}" if self.judge else "") + (
            f":shard{self.shard}/{self.n_shards}" if self.n_shards > 1 else "")

    def llm(self, models: list[str]) -> LLMClient:
        self.accounting = self.accounting or Accounting(label=self.label)
        for m in models:
            if m not in self.models_used:
                self.models_used.append(m)
        from ..llm import Cache, LLMClient  # here: a job that makes no call never imports the client (openai)

        client = LLMClient(self.config, Cache(self.config.paths["cache"]), self.accounting)
        for p in client.layer_prompts:  # the LLM layer's own prompts (JSON instruction, repair): every stage's
            self._record(p)
        return client

    def use_prompt(self, prompt: Prompt) -> Prompt:
        """Record a prompt the stage renders (provenance). A prompt its declaration (Stage.prompts) does not
        name is refused: the rule would not rerun the job when it changes, nor the estimate price it."""
        from .registry import STAGES

        declared = STAGES[self.stage].prompts if self.stage in STAGES else None
        if declared is not None and prompt.name not in declared:
            raise UserError(f"stage {self.stage}: prompt '{prompt.name}' is not one it declares "
                            f"(Stage(prompts=...) in its family's manifest: {', '.join(declared) or 'none'})")
        return self._record(prompt)

    def _record(self, prompt: Prompt) -> Prompt:
        if prompt not in self.prompts_used:
            self.prompts_used.append(prompt)
        return prompt

    # outputs ------------------------------------------------------------------------------
    def write(self, name: str, rows: list[dict], **extra) -> None:
        """Write one JSONL output atomically, with its provenance sidecar."""
        path = self.outputs[name]
        prov = provenance(self.stage, self.config, self.prompts_used, self.models_used,
                          inputs=[str(p) for p in self.inputs.values()],
                          extra={"rows": len(rows), "shard": [self.shard, self.n_shards], **extra})
        write_provenance(path, prov)
        write_jsonl(path, rows)
        self.row_statuses.update(str(r["status"]) for r in rows if isinstance(r, dict) and "status" in r)

    def finish(self, error: str | None = None) -> None:
        """Write the call log and the job's summary file, print the one-line summary (to the job's log).

        Called in a `finally`: a job that crashed or stopped still leaves its call log and cost.
        """
        totals = self.accounting.totals() if self.accounting is not None else None
        writes = [("job summary", lambda: self._write_summary(totals, error))]
        if self.accounting is not None and self.calls_log is not None:
            writes.insert(0, ("call log", lambda: self.accounting.write_records(self.calls_log)))
        for what, write in writes:  # reports: neither hides the job's own outcome (e.g. a full disk)
            try:
                write()
            except OSError as exc:
                print(f"warning: {what} not written: {exc.strerror or exc}", file=sys.stderr)
        if self.accounting is None:
            if error is None:  # a job stopped before any model call prints only its error line
                print(f"SUMMARY {self.stage}: no model calls", file=sys.stderr)
        else:
            infra = f" infra_retries={self.infra_retries}" if self.infra_retries else ""
            print(self.accounting.summary() + infra, file=sys.stderr, flush=True)

    def summary_path(self) -> Path:
        """<logs>/summary/<stage>/<label>.<hash of the outputs>.json: one file per job, rewritten by its rerun."""
        ident = sha256_text(canonical_json(sorted((k, str(v)) for k, v in self.outputs.items())))[:10]
        name = re.sub(r"[^A-Za-z0-9._-]+", "_", self.label)
        return Path(self.config.paths["logs"]) / "summary" / self.stage / f"{name}.{ident}.json"

    def _write_summary(self, totals: dict | None, error: str | None) -> None:
        if not self.outputs:
            return
        atomic_write_json(self.summary_path(), {
            "stage": self.stage, "label": self.label, "status": "failed" if error else "ok", "error": error,
            "outputs": [str(p) for p in self.outputs.values()], "finished": time.time(),
            "llm": totals, "not_applicable": self.not_applicable, "row_statuses": dict(self.row_statuses),
            "infra_retries": self.infra_retries,
        })
