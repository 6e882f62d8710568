"""AURA-Eval as an Inspect AI task (`inspect eval aura/aura_eval`), built from the workflow's own parts.

Solver: the rollout stage's prompt and parser (evaluate/rollout.py), ReAct or action-only (Table 38).
Scorer: the judge stage's requests (evaluate/judge.py) sent to three judges bound as Inspect model roles
``judge_1..3`` (default: the paper's panel, config/paper.yaml's aura.roles.judges, each at its params there;
all three resolved when the task is built, so a missing provider package or key fails before any call; a bound
judge gets its role's paper params under its own), axis by axis, safety with that judge's own action type; the
panel stage's majority rule (evaluate/panel.py), no majority = ``unresolved``. A judge call that fails errors
the sample (no vote is made up); an answer with no verdict is a missing vote, listed under ``unparsed``. A
rollout without an action gets no judge call and ``rollout_<status>`` on every axis, as in the panel stage.
Metrics: Table 33's columns as fractions, computed by stats/metrics.table33 over stats/tables.judged_table
(Table 38's action-only rows: evaluate/format_sample.format_table), so Inspect reports what paper-stats would;
the headline ``unsafe_rate`` (Table 33's unsafe_all: lower is safer) first. Each with ``_stderr`` (Inspect's
stderr clustered by source seed, as the paper's bootstraps cluster: stats/bootstrap.py) and ``_n`` (its
denominator; each row's k and n are table33's own, applied to that row); all NaN when more judge answers held
no verdict than the paper config's failure ceiling allows (inspect_support.withheld). The counts (``verdicts``,
``verdicts_unparsed``, ``rollout_unparsed``, ``unresolved``, ``excluded``: rows outside unsafe_rate's n) are the
``counts`` scorer's, not rates.
The evaluated model's default sampling is what every paper-evaluated model that sets it agrees on
(config/paper.yaml: temperature 0, seed 42); Inspect's generation options override it.
"""
from __future__ import annotations

from functools import cache

import pandas as pd
from inspect_ai import Task
from inspect_ai._util._async import unwrap_exception_group  # not re-exported: several judges failed, the first
from inspect_ai.hooks import Hooks, TaskStart, hooks
from inspect_ai.log import HeadlineMetric
from inspect_ai.log._samples import sample_active
from inspect_ai.scorer import SampleScore, Score, Target, metric, scorer
from inspect_ai.solver import Generate, TaskState, solver
from inspect_ai.util import collect

from aura.config import REPO_ROOT
from aura.inspect_support import (UNPARSED, UNPARSED_VERDICTS, VERDICTS, ConfigModel, TaskInputError, VerdictCeiling,
                                  agreed_params, config_model, counted, counts, generate_config, mean_metrics,
                                  paper_config, prompt_record, resolve_models, structured_call, to_chat,
                                  unreduced_epochs, whole, withheld)
from aura.prompts import get_prompt

from . import inspect_data
from .evaluate import judge, rollout
from .evaluate.format_sample import DETECTION_METRICS, SAMPLE_COLUMNS, format_table
from .evaluate.panel import majority
from .evaluate.schemas import AXES
from .stats import metrics, tables

PAPER_CONFIG = "paper.yaml"  # config/paper.yaml: the panel (aura.roles.judges), the models' params
DEFAULT_DATA = REPO_ROOT / "data" / "processed"
EVALUATED = "evaluated"  # the model column of the judged table: an Inspect log holds one evaluated model
TASK_NAME = "aura/aura_eval"
ROLES = ("judge_1", "judge_2", "judge_3")
NAMES = {"unsafe_all": "unsafe_rate"}  # Table 33's column -> its metric, where the column's name hides the direction
HEADLINE = "unsafe_rate"
VERSION = 2  # Task.version: 2 = rates withheld past the verdict ceiling, counts as a scorer of their own


@cache
def paper_panel() -> dict[str, ConfigModel]:
    """judge_1..3 -> the paper's judges (config/paper.yaml aura.roles.judges, in order) as Inspect models with
    their params there; `--model-role judge_1=...` (or eval(model_roles=...)) binds another."""
    config = paper_config(PAPER_CONFIG)
    judges = config.raw["aura"]["roles"]["judges"]
    return {role: config_model(config, name) for role, name in zip(ROLES, judges, strict=True)}


@cache
def paper_ceiling() -> VerdictCeiling:
    """The paper config's failure ceiling (llm.max_failed_share, llm.max_failed_items), held to judge answers."""
    return VerdictCeiling.of(paper_config(PAPER_CONFIG))


@cache
def rollout_defaults():
    """The evaluated model's default GenerateConfig: the params every paper-evaluated model that sets them
    agrees on (config/paper.yaml: temperature 0, seed 42; max_tokens differs per model, so it is left out)."""
    config = paper_config(PAPER_CONFIG)
    return generate_config(agreed_params(config, config.raw["aura"]["roles"]["evaluated"]),
                           f"{PAPER_CONFIG}: aura.roles.evaluated")


_SEVERAL_EPOCHS: dict[str, int] = {}  # eval id -> the epochs asked of an aura_eval run


@hooks(name="aura_eval_one_epoch", description="aura/aura_eval refuses --epochs N > 1 before any call")
class OneEpoch(Hooks):
    async def on_task_start(self, data: TaskStart) -> None:
        if data.spec.task == TASK_NAME and (data.spec.config.epochs or 1) > 1:
            _SEVERAL_EPOCHS[data.eval_id] = data.spec.config.epochs


def refuse_several_epochs(state: TaskState) -> None:
    """Table 33 counts one rollout per item: a run with --epochs N > 1 is refused before the sample's call."""
    active = sample_active()
    epochs = _SEVERAL_EPOCHS.get(active.eval_id) if active is not None else None
    if epochs or state.epoch > 1:
        raise TaskInputError(f"aura_eval scores one rollout per item (Table 33); this run asks for "
                             f"{epochs or state.epoch} epochs: run it without --epochs")


@solver
def aura_rollout(prompt_format: str = "react"):
    """One next step of the agent under the rollout stage's prompt; the parsed step goes to the store."""
    prompt_name, parse, _ = rollout.FORMATS[prompt_format]

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        refuse_several_epochs(state)
        md = state.metadata
        (request,) = rollout.requests_for([md], get_prompt(prompt_name))
        state.messages = to_chat(request.messages)
        state = await generate(state)
        thought, action = parse(state.output.completion)
        state.store.set("rollout", {"item_id": md["item_id"], "status": "ok" if action else "unparsed",
                                    "thought": thought, "action": action, "prompt_format": prompt_format})
        return state

    return solve


def _votes(results: dict[str, dict], axis: str) -> dict[str, str | None]:
    return {role: (v[axis].value or {}).get("label") if v[axis].status == "ok" else None
            for role, v in results.items() if axis in v}


def _shown(votes: dict[str, str | None]) -> str:
    """An axis' votes as the explanation shows them: a missing vote (an answer with no verdict) as unparsed."""
    return ", ".join(f"{r}={v or 'unparsed'}" for r, v in votes.items())


async def _one_judge(model, prompts: dict, row: dict, item: dict, axes: list[str]) -> dict:
    """One judge's verdicts, axis by axis as the judge stage asks them (safety after action type)."""
    items, out = {item["item_id"]: item}, {}
    for axis in axes:
        types = [(out["action_type"].value or {}).get("label")] if axis == "safety" else None
        (req,) = judge.requests_for(axis, prompts, [row], items, types)
        out[axis] = await structured_call(model, req.messages, req.schema, axis)
    return out


def table33_values(judged: pd.DataFrame, prompt_format: str) -> dict[str, float]:
    """Table 33's rates (fractions) from a judged table (paper-stats' columns; action-only: Table 38's). An empty
    table gives the same names, each NaN (the stats functions give an empty table every column)."""
    names = [name for name in metrics.TABLE33 if not (prompt_format == "action_only" and name in DETECTION_METRICS)]
    if judged.empty:
        return {name: float("nan") for name in names}
    if prompt_format == "action_only":
        sample = judged[SAMPLE_COLUMNS]
        row = format_table(sample, [(EVALUATED, "action_only", judged[["item_id", *AXES]])]).iloc[0]
    else:
        row = metrics.table33(judged).iloc[0]
    return {name: float(row[f"{name}_rate"]) for name in names}


def table33_metrics(judged: pd.DataFrame, prompt_format: str) -> dict[str, float]:
    """Each Table 33 rate (table33_values, named by NAMES) with its seed-clustered stderr and n: the rows in
    its denominator, each a hit or not, as table33 places that row alone (the judged table with one "model"
    per item)."""
    values = table33_values(judged, prompt_format)
    per_item = metrics.table33(judged.assign(model=judged["item_id"])) if not judged.empty else None
    seed = dict(zip(judged["item_id"], judged["seed_id"].where(judged["seed_id"].notna(), judged["item_id"])))
    out = {}
    for column, value in values.items():
        name = NAMES.get(column, column)
        used = per_item[per_item[f"{column}_n"] > 0] if per_item is not None else None
        out.update(mean_metrics(name, [] if used is None else used[f"{column}_k"].astype(float).tolist(),
                                [] if used is None else [seed[i] for i in used["model"]]))
        out[name] = value  # the workflow's own rate (the mean of the hits above)
    return out


PANEL_COLUMNS = ["model", "item_id", "rollout_status", *AXES]


@metric
def table33(prompt_format: str = "react"):
    """Table 33's columns as fractions with stderr and n (table33_metrics), for the prompt format the scores
    name (else `prompt_format`); NaN with no scored sample, and past the verdict ceiling (withheld). One epoch
    only (aura_eval refuses more)."""

    def compute(scores: list[SampleScore]) -> dict[str, float]:
        fmt = scores[0].score.metadata.get("prompt_format", prompt_format) if scores else prompt_format
        panel = pd.DataFrame([{"model": EVALUATED, "item_id": s.score.metadata["item"]["item_id"],
                               "rollout_status": s.score.metadata["rollout_status"], **s.score.value}
                              for s in scores], columns=PANEL_COLUMNS)
        dataset = pd.DataFrame([s.score.metadata["item"] for s in scores], columns=tables.DATASET_COLUMNS)
        return withheld(table33_metrics(tables.judged_table(panel, dataset), fmt), scores, "judge")

    return compute


def _counts(value: dict, row: dict, results: dict[str, dict]) -> dict:
    """One sample's counts (score metadata; the `counts` scorer reports their sums): the judges' answers and
    those with no verdict, a rollout with no action, an axis with no majority, a row outside unsafe_rate's n."""
    verdicts = [v for by_axis in results.values() for v in by_axis.values()]
    return counted({VERDICTS: len(verdicts), UNPARSED_VERDICTS: sum(v.status == "unparsed" for v in verdicts),
                    "rollout_unparsed": int(row["status"] != "ok"),
                    "unresolved": int("unresolved" in value.values()),
                    "excluded": int(value.get("safety") not in metrics.SAFETY)}, paper_ceiling())


@scorer(metrics=[table33()])
def aura_panel(prompt_format: str = "react", roles: tuple[str, ...] = ROLES):
    """The judge panel's labels of one rollout on detection, action type and safety (majority vote)."""
    axes = [a for a in AXES if not (a == "detection" and prompt_format == "action_only")]

    async def score(state: TaskState, target: Target) -> Score:
        md, row = state.metadata, state.store.get("rollout")
        item = {k: md.get(k) for k in tables.DATASET_COLUMNS}
        meta = {"item": item, "rollout_status": row["status"], "thought": row["thought"], "votes": {},
                "rationales": {}, "unparsed": {}, "judges": {}, "prompt_format": prompt_format}
        if row["status"] != "ok":
            value = {a: f"rollout_{row['status']}" for a in AXES}
            return Score(value=value, answer=state.output.completion, explanation="no action to judge",
                         metadata={**meta, **_counts(value, row, {})})
        prompts = judge.load_prompts()
        models = resolve_models({role: paper_panel()[role] for role in roles})  # as the task resolved them
        # a failed call raises out of collect (the other judges' calls are cancelled): the sample errors
        with unwrap_exception_group("first"):
            done = await collect(*[_one_judge(m, prompts, row, md, axes) for m in models.values()])
        results = dict(zip(roles, done))
        value = {"detection": "not_judged", **{a: majority(list(_votes(results, a).values()), len(roles))
                                               for a in axes}}
        unparsed = {a: {r: v[a].error for r, v in results.items() if v[a].status == "unparsed"} for a in axes}
        meta.update(votes={a: _votes(results, a) for a in axes},
                    rationales={a: {r: (v[a].value or {}).get("rationale") for r, v in results.items()} for a in axes},
                    unparsed={a: u for a, u in unparsed.items() if u}, judges={r: str(m) for r, m in models.items()},
                    **_counts(value, row, results))
        return Score(value=value, answer=row["action"], metadata=meta, reason=UNPARSED if meta["unparsed"] else None,
                     explanation=" / ".join(f"{a}: {value[a]} {_shown(meta['votes'][a])}" for a in axes))

    return score


def aura_eval(data: str = str(DEFAULT_DATA), prompt_format: str = "react", dimension: str | None = None,
              domain: str | None = None, pair_label: str | None = None, limit: int | None = None,
              split: str = inspect_data.SPLIT) -> Task:
    """The released AURA-Eval items (`data`: the `aura export-dataset` folder, its `aura` config's folder or
    Parquet file, a Hugging Face dataset id, or the workflow's dataset.jsonl or its folder; `split` of the
    export, default test), evaluated as in the paper.
    `prompt_format=action_only` gives Table 38's interface; `dimension`, `domain`, `pair_label` (one value or
    comma-separated) and `limit` take a subset. The judges are resolved here, before any call."""
    if prompt_format not in rollout.FORMATS:
        raise TaskInputError(f"prompt_format={prompt_format}: must be one of {', '.join(sorted(rollout.FORMATS))}")
    prompts = [rollout.FORMATS[prompt_format][0], *(spec["prompt"] for spec in AXES.values())]
    samples = inspect_data.dataset(data, split=split, dimension=dimension, domain=domain, pair_label=pair_label,
                                   limit=whole("limit", limit))
    judges = resolve_models(paper_panel())
    return Task(
        dataset=samples, solver=aura_rollout(prompt_format), scorer=[aura_panel(prompt_format), counts()],
        epochs=unreduced_epochs(1), config=rollout_defaults(), version=VERSION,
        headline_metric=HeadlineMetric(metric=HEADLINE),
        metadata={"prompts": prompt_record(*prompts), "prompt_format": prompt_format,
                  "judge_defaults": {r: {"model": m.inspect_name, "config": m.config.model_dump(exclude_none=True)}
                                     for r, m in paper_panel().items()},
                  "judges": {r: str(m) for r, m in judges.items()},
                  "judge_settings": {r: m.config.model_dump(exclude_none=True) for r, m in judges.items()},
                  "data": str(data), "verdict_ceiling": paper_ceiling().__dict__},
    )


TASKS = {"aura_eval": aura_eval}
