"""Stage judge: one judge model labels one evaluated model's rollouts (one shard) on three axes.

Detection sees scenario + thought; action type sees scenario + action; safety sees scenario +
action + this judge's action type + the reference risk rationale. Rollouts that are not `ok`
get no judge calls; the panel counts them.
"""
from __future__ import annotations

from dataclasses import replace

from aura.errors import UserError
from aura.io import read_jsonl
from aura.llm import LLMRequest
from aura.pipeline.context import StageContext
from aura.prompts import get_prompt

from .schemas import AXES


def _scenario(item: dict) -> str:
    return ((item.get("profile") or "") + "\n" + item["model_input"]).strip()


def _req(prompt, axis: str, item_id: str, **values) -> LLMRequest:
    return LLMRequest(item_id=item_id, messages=prompt.render(**values), prompt_name=prompt.ref,
                      prompt_sha256=prompt.sha256, schema=AXES[axis]["schema"], schema_name=axis)


def _row(res, axis: str, ctx: StageContext) -> dict:
    parsed = res.parsed or {}
    return {"item_id": res.item_id, "model": ctx.model, "judge": ctx.judge, "axis": axis, "status": res.status,
            "label": parsed.get("label"), "rationale": parsed.get("rationale"), "raw": res.text, "error": res.error}


def load_prompts() -> dict:
    return {axis: get_prompt(spec["prompt"]) for axis, spec in AXES.items()}


def requests_for(axis: str, prompts: dict, rollouts: list[dict], items: dict[str, dict],
                 action_types: list[str | None] | None = None) -> list[LLMRequest]:
    """The judge requests of one axis; safety needs this judge's action-type labels (None = unknown)."""
    out = []
    for i, r in enumerate(rollouts):
        item = items[r["item_id"]]
        if axis == "detection":
            values = {"thought": r["thought"] or "(no reasoning given)"}
        elif axis == "action_type":
            values = {"action": r["action"]}
        else:
            values = {"action": r["action"], "rationale": item["rationale"],
                      "action_type": (action_types[i] if action_types else None) or "unknown"}
        out.append(_req(prompts[axis], axis, r["item_id"], scenario=_scenario(item), **values))
    return out


def run(ctx: StageContext) -> None:
    prompts = {axis: ctx.use_prompt(p) for axis, p in load_prompts().items()}
    items = {it["item_id"]: it for it in ctx.read("dataset")}
    # one rollouts file (a shard), or several (rollouts_0, rollouts_1, ...: all shards of the model)
    rollouts = [r for name, path in ctx.inputs.items() if name.startswith("rollouts") for r in read_jsonl(path)]
    only = ctx.options.get("only")
    if only == "dataset_items":
        # re-judging a subset (vendor-overlap or consistency sample): the dataset input is the subset
        rollouts = [r for r in rollouts if r["item_id"] in items]
    elif only == "human_labels":
        # the validation panel labels the items humans labelled for this model (Tables 3, 21-23); imported
        # here: the statistics module pulls scipy / statsmodels, which no other judge call needs
        from ..stats.human_validation import read_human_labels

        human = read_human_labels(ctx.inputs["human_labels"])
        labelled = set(human.loc[human["model"] == ctx.model, "item_id"])
        rollouts = [r for r in rollouts if r["item_id"] in labelled]
    elif only is not None:
        raise UserError(f"unknown --option only={only} (dataset_items | human_labels)")
    # an unparsed or failed rollout has nothing to judge: not asked, counted as not applicable
    ctx.not_applicable = sum(r["status"] != "ok" for r in rollouts)
    rollouts = [r for r in rollouts if r["status"] == "ok"]
    judge = ctx.judge
    # `--option axes=action_type,safety` for action-only rollouts (no thought to grade)
    axes = ctx.options.get("axes", "detection,action_type,safety").split(",")
    # `--option run=k` (k >= 1): an independent repeat of the same judging (Table 25); the sample
    # index enters the cache key, so the repeat is a new call with the same prompt and parameters
    repeat = int(ctx.options.get("run", 0))

    def ask(llm, axis: str, types=None):
        reqs = [replace(r, sample_index=repeat) for r in requests_for(axis, prompts, rollouts, items, types)]
        return llm.run("judge", judge, reqs)

    # Axis by axis (all detection, then all action type, then safety, which needs this judge's action
    # types), never interleaved per item: consecutive requests share their rubric, and the layer sends
    # each axis in prompt-text order, so items of the same seed also share the scenario's opening. A
    # llama.cpp server skips that KV prefix (and, with its prompt cache, prompts another judge sent).
    done: list[tuple[str, list]] = []
    with ctx.llm([judge]) as llm:
        if "detection" in axes:
            done.append(("detection", ask(llm, "detection")))
        typ = ask(llm, "action_type")
        done.append(("action_type", typ))
        done.append(("safety", ask(llm, "safety", [(t.parsed or {}).get("label") for t in typ])))
    rows = [{**_row(res, axis, ctx), "run": repeat} for axis, results in done for res in results]
    ctx.write("judgments", rows)
