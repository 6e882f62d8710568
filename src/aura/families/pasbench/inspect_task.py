"""PaSBench's proactive setting as an Inspect AI task (`inspect eval aura/pasbench`), from the family's parts.

Samples: the items file the respond stage reads (text logs; image items with their files). Solver: the
respond stage's request (respond.observation_request: proactive prompt, images as content parts) and its
answer parser. N samples per item are Inspect epochs (`samples`, the paper's 16) at the paper's sampling.
Scorer: the judge stage's request (judge.judge_request: risk_judge prompt, JSON schema, temperature 0) sent
to the model role ``judge`` (default the paper's GPT-4.1). Each epoch scores {detected, judged, unparsed,
failed}; the reducer sums them per item (c, n) and the metric is metrics.rates over those counts:
Average/Best/Worst-of-N per modality, as the stats stage computes them.
"""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pandas as pd
from inspect_ai import Epochs, Task
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.model import GenerateConfig, get_model
from inspect_ai.scorer import SampleScore, Score, Target, metric, score_reducer, scorer
from inspect_ai.solver import Generate, TaskState, solver

from aura.config import REPO_ROOT
from aura.inspect_support import prompt_record, structured_call, to_chat
from aura.io import read_jsonl
from aura.prompts import get_prompt

from . import metrics
from .judge import JUDGE_PARAMS, judge_request
from .respond import observation_request, parse_answer

PAPER_JUDGE = "openai/gpt-4.1"  # config/pasbench.yaml: pasbench.judge
PAPER_SAMPLING = GenerateConfig(temperature=0.7, top_p=0.9, max_tokens=1024)  # pasbench.params there
DEFAULT_DATA = REPO_ROOT / "data" / "interim" / "pasbench"
EVALUATED = "evaluated"
COUNTS = ("detected", "judged", "unparsed", "failed")
NO_CONFIG = SimpleNamespace(raw={})  # the image cap of the LLM layer's default (llm.max_image_bytes unset)


def read_items(path: str) -> list[dict]:
    """The items of the pasbench-items stage: `items.jsonl`, given as the file or its folder."""
    p = Path(path)
    return list(read_jsonl(p / "items.jsonl" if p.is_dir() else p))


def dataset(path: str, modality: str | None = None, limit: int | None = None) -> MemoryDataset:
    items = [it for it in sorted(read_items(path), key=lambda it: it["item_id"])
             if modality is None or it["modality"] == modality]
    items = items[:limit] if limit else items
    return MemoryDataset([Sample(id=it["item_id"], input=it.get("log") or f"({it.get('n_images')} images)",
                                 target=it.get("risk_reason") or "", metadata=it) for it in items],
                         name="pasbench", location=str(path))


@solver
def proactive():
    """The person's observation, nobody asking anything: the respond stage's prompt, parsed into the store."""

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        prompts = {"text": get_prompt("proactive_text"), "image": get_prompt("proactive_image")}
        state.messages = to_chat(observation_request(state.metadata, prompts, NO_CONFIG).messages)
        state = await generate(state)
        p = parse_answer(state.output.completion)
        state.store.set("proactive", {"thought": p.thought, "warn": p.warn, "answer": p.answer})
        return state

    return solve


@score_reducer(name="pasbench_counts")
def item_counts():
    """One item's epochs summed: detected (c), judged (n), unparsed, failed."""

    def reduce(scores: list[Score]) -> Score:
        return Score(value={k: sum(int(s.value[k]) for s in scores) for k in COUNTS},
                     metadata={k: scores[0].metadata[k] for k in ("item_id", "modality")})

    return reduce


@metric
def pasbench_rates():
    """Average/Best/Worst-of-N per modality (`<rate>_<modality>`), metrics.rates over the items' counts."""

    def compute(scores: list[SampleScore]) -> dict[str, float]:
        counts = pd.DataFrame([{"model": EVALUATED, "modality": s.score.metadata["modality"],
                                "item_id": s.score.metadata["item_id"], "n": int(s.score.value["judged"]),
                                "c": int(s.score.value["detected"]), "unparsed": int(s.score.value["unparsed"]),
                                "failed": int(s.score.value["failed"]), "not_applicable": 0} for s in scores],
                              columns=metrics.COUNT_COLUMNS)
        table = metrics.rates(counts)
        return {f"{rate}_{row['modality']}": float(row[rate]) for _, row in table.iterrows() for rate in metrics.RATES}

    return compute


@scorer(metrics=[pasbench_rates()])
def risk_judge(role: str = "judge"):
    """Whether one proactive answer names and explains the item's risk (the judge stage's call)."""

    async def score(state: TaskState, target: Target) -> Score:
        item, answer = state.metadata, state.store.get("proactive")
        model = get_model(role=role, default=PAPER_JUDGE)
        req = judge_request(get_prompt("risk_judge"), item, answer["answer"])
        v = await structured_call(model, req.messages, req.schema, req.schema_name, GenerateConfig(**JUDGE_PARAMS))
        detected = (v.value or {}).get("detected") if v.status == "ok" else None
        value = {"detected": int(detected is True), "judged": int(isinstance(detected, bool)),
                 "unparsed": int(v.status == "unparsed"), "failed": int(v.status == "failed")}
        return Score(value=value, answer=answer["answer"], explanation=(v.value or {}).get("rationale") or v.error,
                     metadata={"item_id": item["item_id"], "modality": item["modality"], "warn": answer["warn"],
                               "status": v.status, "judge": str(model)})

    return score


def pasbench(data: str = str(DEFAULT_DATA), samples: int = 16, modality: str | None = None,
             limit: int | None = None) -> Task:
    """PaSBench items (`data`: the items file or its folder) in the proactive setting, `samples` answers per
    item; `modality` (text | image) and `limit` take a subset."""
    return Task(dataset=dataset(data, modality, int(limit) if limit else None), solver=proactive(),
                scorer=risk_judge(), epochs=Epochs(int(samples), item_counts()), config=PAPER_SAMPLING,
                metadata={"prompts": prompt_record("proactive_text", "proactive_image", "risk_judge"),
                          "judge_default": PAPER_JUDGE, "data": str(data)})


TASKS = {"pasbench": pasbench}
