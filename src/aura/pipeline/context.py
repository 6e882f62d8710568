"""StageContext: what one Snakemake job (stage, model, shard) needs, and how it writes outputs."""
from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from ..config import Config
from ..io import read_jsonl, sha256_text, write_jsonl
from ..llm import Cache, LLMClient
from ..llm.accounting import Accounting
from ..prompts import Prompt
from ..provenance import provenance, write_provenance


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

    # inputs -------------------------------------------------------------------------------
    def read(self, name: str) -> list[dict]:
        return list(read_jsonl(self.inputs[name]))

    def in_shard(self, rows: Iterable[dict], key: str = "item_id") -> list[dict]:
        return [r for r in rows if shard_of(r[key], self.n_shards) == self.shard]

    # LLM ----------------------------------------------------------------------------------
    def llm(self, models: list[str]) -> LLMClient:
        label = f"{self.stage}" + (f":{self.model}" if self.model else "") + (
            f":{self.judge}" if self.judge else "") + (
            f":shard{self.shard}/{self.n_shards}" if self.n_shards > 1 else "")
        self.accounting = self.accounting or Accounting(label=label)
        for m in models:
            if m not in self.models_used:
                self.models_used.append(m)
        client = LLMClient(self.config, Cache(self.config.paths["cache"]), self.accounting)
        for p in client.layer_prompts:
            self.use_prompt(p)
        return client

    def use_prompt(self, prompt: Prompt) -> Prompt:
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

    def finish(self) -> None:
        """Write the call log and print the one-line summary (goes to the job's log)."""
        if self.accounting is None:
            print(f"SUMMARY {self.stage}: no model calls", file=sys.stderr)
            return
        if self.calls_log is not None:
            self.accounting.write_records(self.calls_log)
        print(self.accounting.summary(), file=sys.stderr, flush=True)
