"""PaSBench's proactive setting as an Inspect AI task (`inspect eval aura/pasbench`), from the family's parts.

Samples: the export's pasbench_text / pasbench_image rows (aura.inspect_dataset; embedded images written to
files), or the items file the respond stage reads (text logs; image items with their files). Solver: the
respond stage's request (respond.observation_request: proactive prompt, images as content parts) and its
answer parser. N samples per item are Inspect epochs (`samples`, the paper's 16) at the paper's sampling
(config/pasbench.yaml: pasbench.samples, pasbench.params). Scorer: the judge stage's request
(judge.judge_request: risk_judge prompt, JSON schema) sent to the model role ``judge`` (default the paper's
pasbench.judge, GPT-4.1, at its params there and the request's (temperature 0), which a bound judge gets too
under its own settings; resolved when the task is built, so a missing provider package or key fails before
any call). A judge call that fails errors the sample; an answer with no verdict is an `unparsed` row. Each
epoch's score is the judgment row's {status, detected}; the metric groups an item's epochs (no reducer) and
counts them with metrics.item_counts (c, n by the stats stage's rules), then takes each item's value of every
rate with metrics.item_values: Average/Best/Worst-of-N per modality as fractions (means over items, as the
stats stage's rates), each with ``_stderr`` (Inspect's stderr over items: clustered by item, as the stats
stage's bootstrap) and ``_n`` (items); all NaN when more judge answers held no verdict than the paper config's
failure ceiling allows (inspect_support.withheld). The counts (``verdicts``, ``verdicts_unparsed``: judge answers
with no verdict, counted as not warned) are the ``counts`` scorer's, not rates.
"""
from __future__ import annotations

import tempfile
from functools import cache
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
from inspect_ai import Task
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.scorer import SampleScore, Score, Target, metric, scorer
from inspect_ai.solver import Generate, TaskState, solver

from aura.config import REPO_ROOT
from aura.inspect_support import (UNPARSED, UNPARSED_VERDICTS, VERDICTS, ConfigModel, TaskInputError, VerdictCeiling,
                                  config_model, counted, counts, generate_config, mean_metrics, paper_config,
                                  prompt_record, resolve_models, structured_call, to_chat, unreduced_epochs, whole,
                                  withheld)
from aura.inspect_dataset import ExportSpec, read_export
from aura.prompts import get_prompt

from . import metrics
from .judge import JUDGE_PARAMS, judge_request
from .respond import observation_request, parse_answer, setting

PAPER_CONFIG = "pasbench.yaml"  # config/pasbench.yaml: pasbench.judge, pasbench.params, pasbench.samples
DEFAULT_DATA = REPO_ROOT / "data" / "interim" / "pasbench"
EVALUATED = "evaluated"
ROLE = "judge"
SPLIT = "test"  # the export's split of the released items
NO_CONFIG = SimpleNamespace(raw={})  # the image cap of the LLM layer's default (llm.max_image_bytes unset)
VERSION = 2  # Task.version: 2 = rates withheld past the verdict ceiling, counts as a scorer of their own


@cache
def paper_judge() -> ConfigModel:
    """The paper's judge (pasbench.judge) at its params and the judge request's (JUDGE_PARAMS, temperature 0:
    the settings a bound judge gets too, under its own)."""
    config = paper_config(PAPER_CONFIG)
    return config_model(config, setting(config, "judge"), JUDGE_PARAMS)


@cache
def paper_ceiling() -> VerdictCeiling:
    """The paper config's failure ceiling (llm.max_failed_share, llm.max_failed_items), held to judge answers."""
    return VerdictCeiling.of(paper_config(PAPER_CONFIG))


@cache
def paper_sampling():
    """The evaluated model's sampling (pasbench.params: temperature 0.7, top-p 0.9, 1024 tokens) and N."""
    config = paper_config(PAPER_CONFIG)
    return generate_config(setting(config, "params"), f"{PAPER_CONFIG}: pasbench.params"), int(setting(config, "samples"))


SPEC = ExportSpec("pasbench", {"pasbench_text": ("item_id", "log", "risk_reason", "trigger"),
                               "pasbench_image": ("item_id", "images", "risk_reason", "trigger")},
                  workflow_file="items.jsonl")


def _item(row: dict, config: str | None, images) -> dict:
    """An item as the respond stage reads it: a workflow row as it is; an export row with its modality (from
    its config) and its embedded images written to files under the folder `images()` gives (the request reads
    files)."""
    if config is None:
        return row
    modality = config.removeprefix("pasbench_")
    paths = []
    for i, image in enumerate(row.get("images") or []):
        path = images() / row["item_id"] / f"{i}-{Path(image.get('path') or 'image.png').name}"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(image["bytes"])
        paths.append(str(path))
    return {**row, "modality": modality, "images": paths}


_IMAGE_FOLDERS: list[tempfile.TemporaryDirectory] = []  # held until the process ends; each deleted then


def image_folder() -> Path:
    """A new folder for the embedded images of one read: kept while the process runs (the solver reads the files,
    once per epoch), deleted when it exits (tempfile.TemporaryDirectory's finalizer)."""
    folder = tempfile.TemporaryDirectory(prefix="aura-pasbench-images-")
    _IMAGE_FOLDERS.append(folder)
    return Path(folder.name)


def read_items(path: str, split: str = SPLIT) -> list[dict]:
    """The items `path` names (aura.inspect_dataset: the export's pasbench_text / pasbench_image configs, or the
    pasbench-items stage's items.jsonl). Embedded images are written under an image_folder (made on the first)."""
    images = cache(image_folder)
    return [_item(row, part.config, images) for part in read_export(path, SPEC, split) for row in part.rows]


def dataset(path: str, modality: str | None = None, limit: int | None = None, split: str = SPLIT) -> MemoryDataset:
    every = read_items(path, split)
    items = [it for it in sorted(every, key=lambda it: it["item_id"])
             if modality is None or it.get("modality") == modality]
    if not items:
        have = sorted({str(it.get("modality")) for it in every})
        raise TaskInputError(f"modality={modality} selects no item of {path} (modalities there: {', '.join(have)})")
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


@metric
def pasbench_rates():
    """Average/Best/Worst-of-N per modality (``<rate>_<modality>``, with ``_stderr`` and ``_n``): each item's
    epochs counted by metrics.item_counts, its rates by metrics.item_values; NaN past the verdict ceiling."""

    def compute(scores: list[SampleScore]) -> dict[str, float]:
        rows = pd.DataFrame([{"item_id": s.score.metadata["item_id"], "model": EVALUATED, "sample": s.sample_id,
                              "modality": s.score.metadata["modality"], **s.score.value} for s in scores],
                            columns=list(metrics.JUDGMENT_COLUMNS))
        per_item = metrics.item_counts(rows)
        out = {}
        for modality in [m for m in metrics.MODALITIES if m in set(per_item["modality"])]:
            judged = per_item[(per_item["modality"] == modality) & (per_item["n"] > 0)]
            values = metrics.item_values(judged["c"], judged["n"])
            for rate in metrics.RATES:
                out.update(mean_metrics(f"{rate}_{modality}", values[rate].tolist()))
        return withheld(out, scores, "judge")

    return compute


@scorer(metrics=[pasbench_rates()])
def risk_judge(role: str = ROLE):
    """Whether one proactive answer names and explains the item's risk (the judge stage's call): the epoch's
    judgment row {status, detected}, as the judge stage writes it."""

    async def score(state: TaskState, target: Target) -> Score:
        item, answer = state.metadata, state.store.get("proactive")
        model = resolve_models({role: paper_judge()})[role]  # as the task resolved it (request params included)
        req = judge_request(get_prompt("risk_judge"), item, answer["answer"])
        v = await structured_call(model, req.messages, req.schema, req.schema_name)  # a failed call raises
        detected = (v.value or {}).get("detected") if v.status == "ok" else None
        return Score(value={"status": v.status, "detected": detected}, answer=answer["answer"],
                     reason=UNPARSED if v.status == "unparsed" else None,
                     explanation=(v.value or {}).get("rationale") or v.error,
                     metadata={"item_id": item["item_id"], "modality": item["modality"], "warn": answer["warn"],
                               "judge": str(model),
                               **counted({VERDICTS: 1, UNPARSED_VERDICTS: int(v.status == "unparsed")},
                                         paper_ceiling())})

    return score


def pasbench(data: str = str(DEFAULT_DATA), samples: int | None = None, modality: str | None = None,
             limit: int | None = None, split: str = SPLIT) -> Task:
    """PaSBench items (`data`: the `aura export-dataset` folder, one of its pasbench_text / pasbench_image
    folders or Parquet files, a Hugging Face dataset id, or the workflow's items file or its folder; `split` of
    the export, default test) in the proactive setting, `samples` answers per item (default the paper's
    pasbench.samples, 16); `modality` (text | image) and `limit` take a subset. The judge is resolved here,
    before any call."""
    sampling, paper_n = paper_sampling()
    n = whole("samples", samples) or paper_n
    samples_ = dataset(data, modality, whole("limit", limit), split)
    judge = resolve_models({ROLE: paper_judge()})[ROLE]
    return Task(dataset=samples_, solver=proactive(), scorer=[risk_judge(), counts()],
                epochs=unreduced_epochs(n), config=sampling, version=VERSION,
                metadata={"prompts": prompt_record("proactive_text", "proactive_image", "risk_judge"),
                          "judge_default": {"model": paper_judge().inspect_name,
                                            "config": paper_judge().config.model_dump(exclude_none=True)},
                          "judge": str(judge), "judge_settings": judge.config.model_dump(exclude_none=True),
                          "data": str(data), "verdict_ceiling": paper_ceiling().__dict__})


TASKS = {"pasbench": pasbench}
