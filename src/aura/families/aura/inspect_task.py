"""AURA-Eval as an Inspect AI task (`inspect eval aura/aura_eval`), built from the workflow's own parts.

Solver: the rollout stage's prompt and parser (evaluate/rollout.py), ReAct or action-only (Table 38).
Scorer: the judge stage's requests (evaluate/judge.py) sent to three judges bound as Inspect model roles
``judge_1..3`` (default: the paper's panel), axis by axis, safety with that judge's own action type; the
panel stage's majority rule (evaluate/panel.py), no majority = ``unresolved``. A rollout without an action
gets no judge call and ``rollout_<status>`` on every axis, as in the panel stage.
Metric: Table 33's columns computed by stats/metrics.table33 over stats/tables.judged_table (Table 38's
action-only rows: evaluate/format_sample.format_table), so Inspect reports what paper-stats would.
"""
from __future__ import annotations

import asyncio

import pandas as pd
from inspect_ai import Epochs, Task
from inspect_ai.model import get_model
from inspect_ai.scorer import SampleScore, Score, Target, metric, score_reducer, scorer
from inspect_ai.solver import Generate, TaskState, solver

from aura.config import REPO_ROOT
from aura.inspect_support import prompt_record, structured_call, to_chat
from aura.prompts import get_prompt

from . import inspect_data
from .evaluate import judge, rollout
from .evaluate.format_sample import DETECTION_METRICS, SAMPLE_COLUMNS, format_table
from .evaluate.panel import majority
from .evaluate.schemas import AXES
from .stats import metrics, tables

# The paper's judge panel (config/paper.yaml, aura.roles.judges) as Inspect model names; `--model-role
# judge_1=...` (or eval(model_roles=...)) binds another.
PAPER_PANEL = {"judge_1": "openai/gpt-5.4", "judge_2": "anthropic/claude-opus-4-6", "judge_3": "google/gemini-3.1-pro"}
DEFAULT_DATA = REPO_ROOT / "data" / "processed"
EVALUATED = "evaluated"  # the model column of the judged table: an Inspect log holds one evaluated model


@solver
def aura_rollout(prompt_format: str = "react"):
    """One next step of the agent under the rollout stage's prompt; the parsed step goes to the store."""
    prompt_name, parse, _ = rollout.FORMATS[prompt_format]

    async def solve(state: TaskState, generate: Generate) -> TaskState:
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


async def _one_judge(model, prompts: dict, row: dict, item: dict, axes: list[str]) -> dict:
    """One judge's verdicts, axis by axis as the judge stage asks them (safety after action type)."""
    items, out = {item["item_id"]: item}, {}
    for axis in axes:
        types = [(out["action_type"].value or {}).get("label")] if axis == "safety" else None
        (req,) = judge.requests_for(axis, prompts, [row], items, types)
        out[axis] = await structured_call(model, req.messages, req.schema, axis)
    return out


def table33_values(judged: pd.DataFrame, prompt_format: str) -> dict[str, float]:
    """Table 33's percentages from a judged table (paper-stats' columns; action-only: Table 38's)."""
    if prompt_format == "action_only":
        sample = judged[SAMPLE_COLUMNS]
        row = format_table(sample, [(EVALUATED, "action_only", judged[["item_id", *AXES]])]).iloc[0]
        return {name: float(row[f"{name}_pct"]) for name in metrics.TABLE33
                if name not in DETECTION_METRICS}
    row = metrics.table33(judged).iloc[0]
    return {name: float(row[f"{name}_pct"]) for name in metrics.TABLE33}


@metric
def table33(prompt_format: str = "react"):
    """Table 33's columns (percent; NaN where no row qualifies) over every scored sample."""

    def compute(scores: list[SampleScore]) -> dict[str, float]:
        panel = pd.DataFrame([{"model": EVALUATED, "item_id": s.score.metadata["item"]["item_id"],
                               "rollout_status": s.score.metadata["rollout_status"], **s.score.value}
                              for s in scores])
        dataset = pd.DataFrame([s.score.metadata["item"] for s in scores], columns=tables.DATASET_COLUMNS)
        return table33_values(tables.judged_table(panel, dataset), prompt_format)

    return compute


@score_reducer(name="aura_one_rollout")
def one_rollout():
    """Keeps a sample's one score as it is (Inspect's default reducer would average the label strings).
    Table 33 counts one rollout per item: several epochs are refused rather than merged."""

    def reduce(scores: list[Score]) -> Score:
        if len(scores) != 1:
            raise ValueError(f"aura_eval scores one rollout per item; got {len(scores)} epochs (run epochs=1)")
        return scores[0]

    return reduce


@scorer(metrics=[table33()])
def aura_panel(prompt_format: str = "react", roles: tuple[str, ...] = tuple(PAPER_PANEL)):
    """The judge panel's labels of one rollout on detection, action type and safety (majority vote)."""
    axes = [a for a in AXES if not (a == "detection" and prompt_format == "action_only")]

    async def score(state: TaskState, target: Target) -> Score:
        md, row = state.metadata, state.store.get("rollout")
        item = {k: md.get(k) for k in tables.DATASET_COLUMNS}
        meta = {"item": item, "rollout_status": row["status"], "thought": row["thought"], "votes": {},
                "rationales": {}, "judges": {}}
        if row["status"] != "ok":
            return Score(value={a: f"rollout_{row['status']}" for a in AXES}, answer=state.output.completion,
                         explanation="no action to judge", metadata=meta)
        prompts = judge.load_prompts()
        models = {role: get_model(role=role, default=PAPER_PANEL.get(role)) for role in roles}
        done = await asyncio.gather(*[_one_judge(m, prompts, row, md, axes)
                                      for m in models.values()])
        results = dict(zip(roles, done))
        value = {"detection": "not_judged", **{a: majority(list(_votes(results, a).values()), len(roles))
                                               for a in axes}}
        meta.update(votes={a: _votes(results, a) for a in axes},
                    rationales={a: {r: (v[a].value or {}).get("rationale") for r, v in results.items()} for a in axes},
                    judges={r: str(m) for r, m in models.items()})
        return Score(value=value, answer=row["action"], metadata=meta,
                     explanation=" / ".join(f"{a}: {value[a]} {meta['votes'][a]}" for a in axes))

    return score


def aura_eval(data: str = str(DEFAULT_DATA), prompt_format: str = "react", dimension: str | None = None,
              domain: str | None = None, pair_label: str | None = None, limit: int | None = None) -> Task:
    """The released AURA-Eval items (`data`: the folder or file of the dataset rows), evaluated as in the
    paper. `prompt_format=action_only` gives Table 38's interface; `dimension`, `domain`, `pair_label`
    (one value or comma-separated) and `limit` take a subset."""
    if prompt_format not in rollout.FORMATS:
        raise ValueError(f"prompt_format must be one of {sorted(rollout.FORMATS)}")
    prompts = [rollout.FORMATS[prompt_format][0], *(spec["prompt"] for spec in AXES.values())]
    return Task(
        dataset=inspect_data.dataset(data, dimension=dimension, domain=domain, pair_label=pair_label,
                                     limit=int(limit) if limit else None),
        solver=aura_rollout(prompt_format), scorer=aura_panel(prompt_format), metrics=[table33(prompt_format)],
        epochs=Epochs(1, one_rollout()),
        metadata={"prompts": prompt_record(*prompts), "prompt_format": prompt_format, "judge_defaults": PAPER_PANEL,
                  "data": str(data)},
    )


TASKS = {"aura_eval": aura_eval}
