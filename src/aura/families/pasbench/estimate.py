"""`python -m aura estimate` for PaSBench: calls, tokens and cost per stage and model, spending nothing.

Items: read from the items file when it exists, else loaded from the configured folder (images not
needed), else the download's configured counts (or the paper's 288 text / 128 image items), capped by
pasbench.max_items. Proactive responses: exact when the items file exists (requests built as the stage
builds them and looked up in the cache: hits excluded). Judge and probes: counted from the files they read
when those exist (judged responses, failed samples, proposals; the knowledge judge: the distinct points the
probe answered A), else projected: every knowledge point's explanation judged, every visible sample judged,
`pasbench.estimate.miss_share` of them probed reactively, every sample proposing a risk (an upper bound).
Samples per item: pasbench.samples, or the model's pasbench.samples_by_model N per set for its respond and
judge lines (every sample); the reactive and verify lines count the first pasbench.samples (what they read).
Token sizes: the prompt file rendered with the items' average observation (characters / 4) plus
IMAGE_TOKENS per image; completions at the call's max_tokens (or the output tokens its stage declares: the
manifest's Stage.calls, which also give each line's LLM-layer role and prompts). A reasoning or
thinking model (a pasbench.model_params entry) is priced at its whole completion budget (an upper bound) unless
estimate.reasoning_tokens names it: then at the stage's answer size plus that many reasoning tokens per call,
within the budget (aura.estimate.reasoning_tokens; every other named model gets them the same way). Every line
carries the LLM-layer role its stage passes to `LLMClient.run` (the judge's calls: `judge`, so the
estimate prices them through the Batch API where llm.batch can send them) and the prompts it renders.
"""
from __future__ import annotations

from pathlib import Path

from aura.config import UserError
from aura.estimate import (CHARS_PER_TOKEN, Line, call_out_tokens, exact_line, offline_client, output_cap,
                           reasoning_assumptions, stage_line)
from aura.io import read_jsonl
from aura.pipeline.layout import layout
from aura.prompts import get_prompt

from . import STAGES, construct_on, evaluated, roster, samples_of, section

PAPER_ITEMS = {"text": 288, "image": 128}
PAPER_AVG_WORDS = 547  # paper Table 1: average words of a text log
IMAGE_TOKENS = 765  # an image part as a vision model counts it (a 512 px image at high detail, OpenAI's rule)
SAMPLED = ("pasbench-respond", "pasbench-reactive")  # the stages whose calls take pasbench.params' sampling


def _items(config) -> tuple[list[dict] | None, dict[str, int], str]:
    """(item rows or None, counts by modality, where they came from)."""
    from .data import PasDataError, data_folder, data_spec, read_folder, select

    pb = section(config.raw)
    path = Path(layout(config.raw)["pasbench_items"])
    if path.exists():
        rows = list(read_jsonl(path))
        note = f"pasbench: {len(rows)} items read from {path}"
    else:
        try:
            loaded = read_folder(data_folder(config.raw), images_dir=data_spec(config.raw).get("images"),
                                 images_required=False, sub_images=data_spec(config.raw).get("sub_images"),
                                 text_only=bool(data_spec(config.raw).get("text_only")))
            rows = [i.model_dump() for i in select(loaded.items, pb["max_items"])]
            note = f"pasbench: {len(rows)} items loaded from {data_folder(config.raw)} (items file not written yet)"
            if loaded.left_out and not data_spec(config.raw).get("text_only"):
                note += (f"; {len(loaded.left_out)} image record(s) without their images left out of this estimate "
                         "(the items job stops on them unless images_required: false)")
        except (PasDataError, OSError):
            counts = (pb["data"].get("download") or {}).get("counts") or PAPER_ITEMS
            caps = pb["max_items"]
            by = {m: min(n, caps[m]) if caps.get(m) is not None else n for m, n in counts.items()}
            if data_spec(config.raw).get("text_only"):  # pasbench.data.text_only: no image item is asked
                by["image"] = 0
            return None, by, (f"pasbench: projected from {by} items (the data folder is not there yet; "
                              f"{'download counts' if counts is not PAPER_ITEMS else 'the paper sizes'})")
    return rows, {m: sum(r["modality"] == m for r in rows) for m in ("text", "image")}, note


def _tokens_in(prompt_name: str, extra_chars: int = 0, images: float = 0.0) -> int:
    prompt = get_prompt(prompt_name)
    chars = sum(len(str(m["content"])) for m in prompt.render(**{v: "" for v in prompt.variables}))
    return (chars + extra_chars) // CHARS_PER_TOKEN + int(images * IMAGE_TOKENS)


def reasoning_budget(config, model: str) -> int | None:
    """The completion budget of a model in pasbench.model_params (a reasoning or thinking model): its
    max_completion_tokens or max_tokens (aura.estimate.output_cap); None for the others. Without a reasoning
    assumption (estimate.reasoning_tokens) its calls are priced at it: reasoning tokens are billed as output and
    never shown, so the budget is the bound the run can reach (an upper bound)."""
    own = (section(config.raw).get("model_params") or {}).get(model)
    return output_cap(own) if own else None


def at_budget(config, model: str) -> int | None:
    """The budget a model's evaluated calls are priced at whole: its reasoning_budget, unless
    estimate.reasoning_tokens names the model (then None: answer size + the assumed reasoning, within it)."""
    return None if model in reasoning_assumptions(config) else reasoning_budget(config, model)


def _line(config, stage: str, kind: str, model: str, calls: int, tokens_in_each: int, basis: str,
          prompts: tuple[str, ...] | None = None, label: str | None = None) -> Line:
    """A line of `calls` calls of the `kind` call `stage` declares (aura.estimate.stage_line). An evaluated call
    is capped as the stage caps it (_cap); a model with a budget in pasbench.model_params is priced at that budget
    (at_budget), or, named in estimate.reasoning_tokens, at the declared size plus its assumed reasoning."""
    evaluated_call = STAGES[stage].call(kind).role == "evaluated"  # model_params: the evaluated model's calls
    cap = _cap(config, model, stage) if evaluated_call else None
    return stage_line(config, stage, kind, model, calls, tokens_in_each, label=label, basis=basis, prompts=prompts,
                      max_tokens=cap, out_each=at_budget(config, model) if evaluated_call else None)


def _cap(config, model: str, stage: str) -> int | None:
    """The output cap of an evaluated call: the model's pasbench.model_params budget, else pasbench.params'
    max_tokens / max_completion_tokens for the sampled calls (SAMPLED), else None (the model's own)."""
    budget = reasoning_budget(config, model)
    if budget:
        return budget
    return output_cap(section(config.raw)["params"]) if stage in SAMPLED else None


def _rows(path: str) -> list[dict] | None:
    return list(read_jsonl(Path(path))) if Path(path).exists() else None


def pasbench_lines(config) -> tuple[list, str]:
    """The estimate's PaSBench lines and a note on where the item counts came from."""
    from .probes import proposed  # a v2 reply has no Warn line: an answer other than "none" is a proposal
    from .respond import can_see, observation_request, sampling_params

    raw, lay = config.raw, layout(config.raw)
    pb = section(raw)
    if not evaluated(raw) and not construct_on(raw):
        return [], ""
    wrong = roster.problems(raw)
    if wrong:
        raise UserError(f"{wrong[0]} ({len(wrong)} roster problem(s))")
    items, by, note = _items(config)
    if roster.summary(raw):
        note += f"; {roster.summary(raw)}"
    n_samples, judge = pb["samples"], pb["judge"]
    max_out = pb["params"].get("max_tokens")
    log_chars = (sum(len(r.get("log") or "") for r in items if r["modality"] == "text") // max(1, by["text"])
                 if items else PAPER_AVG_WORDS * 6)
    avg_images = (sum(r["n_images"] for r in items if r["modality"] == "image") / by["image"]
                  if items and by["image"] else 2.2)  # paper Table 1: 2.2 sub-images on average
    respond_out = max_out or STAGES["pasbench-respond"].call("respond").out_tokens
    client = offline_client(config)
    prompts = {"text": get_prompt("proactive_text"), "image": get_prompt("proactive_image")}
    lines = []
    for m in evaluated(raw):
        vision = bool(config.models[m].vision)
        visible = by["text"] + (by["image"] if vision else 0)
        # N per set: pasbench.samples or the model's pasbench.samples_by_model entry (respond, judge: every
        # sample); the reactive and verify probes read the first pasbench.samples of them (probes.first_n)
        n_of = {x: samples_of(raw, m, x) for x in ("text", "image")}
        shown = {"text": by["text"], "image": by["image"] if vision else 0}
        every = {x: n_of[x] * shown[x] for x in shown}
        firsts = {x: min(n_of[x], n_samples) * shown[x] for x in shown}
        samples, first = sum(every.values()), sum(firsts.values())
        tok = {"text": _tokens_in("proactive_text", log_chars), "image": _tokens_in("proactive_image", images=avg_images)}
        respond_in = sum(every[x] * tok[x] for x in tok) // max(1, samples)
        avg_in = sum(firsts[x] * tok[x] for x in tok) // max(1, first)  # the probes' samples
        seen = ("text", "image") if vision and by["image"] else ("text",)  # the modalities the model is shown
        if items is not None:
            reqs = [observation_request(it, prompts, config, sample=s, params=sampling_params(config, m, s))
                    for it in items if can_see(config, m, it) for s in range(n_of[it["modality"]])]
            # completions as the projected line's: the declared size, capped as the stage caps it
            cap = _cap(config, m, "pasbench-respond")
            line = exact_line(config, client, "pasbench-respond", m, reqs, role="evaluated",
                              prompts=tuple(f"proactive_{x}" for x in seen), max_tokens=cap,
                              out_each=at_budget(config, m) or call_out_tokens(config, "pasbench-respond", "respond",
                                                                              m, cap))
        else:
            line = _line(config, "pasbench-respond", "respond", m, samples, respond_in, "projected",
                         tuple(f"proactive_{x}" for x in seen))
        lines.append(line)
        responses = _rows(lay["pasbench_responses"].format(model=m))
        judged = sum(r["status"] == "ok" for r in responses) if responses is not None else samples
        judge_in = _tokens_in("risk_judge", respond_out * CHARS_PER_TOKEN + 400)
        lines.append(_line(config, "pasbench-judge", "judge", judge, judged, judge_in,
                           "counted" if responses is not None else "projected", label=f"pasbench-judge ({m})"))
        if pb["knowledge_probe"]:
            points = len({r["safety_knowledge"] for r in items}) if items else by["text"]
            lines.append(_line(config, "pasbench-knowledge", "probe", m, points, _tokens_in("knowledge_probe", 150),
                               "counted" if items else "projected"))
            # the judge grades the explanation of every point answered A (probes.run_knowledge): counted from the
            # knowledge file when it exists, else every point (an upper bound)
            probed = _rows(lay["pasbench_knowledge"].format(model=m))
            text_of = {it["item_id"]: it["safety_knowledge"] for it in items or []}  # one call per distinct text
            chose_a = (len({text_of.get(r["item_id"], r["item_id"]) for r in probed if r.get("answer") == "A"})
                       if probed is not None else points)
            explanation = STAGES["pasbench-knowledge"].call("probe").out_tokens * CHARS_PER_TOKEN
            lines.append(_line(config, "pasbench-knowledge", "judge", judge, chose_a,
                               _tokens_in("knowledge_judge", 150 + 200 + explanation),
                               "counted" if probed is not None else "projected", label=f"pasbench-knowledge:judge ({m})"))
        if pb["reactive_probe"]:
            judgments = _rows(lay["pasbench_judgments"].format(model=m))
            failed = (sum(r["status"] == "ok" and r["detected"] is False and r["sample"] < n_samples
                          for r in judgments) if judgments is not None
                      else round(first * pb["estimate"]["miss_share"]))
            basis = "counted" if judgments is not None else "projected"
            lines.append(_line(config, "pasbench-reactive", "probe", m, failed, avg_in + 60, basis,  # + knowledge
                               tuple(f"reactive_{x}" for x in seen)))
            lines.append(_line(config, "pasbench-reactive", "judge", judge, failed, judge_in, basis,
                               label=f"pasbench-reactive:judge ({m})"))
        if pb["propose_verify"]:
            proposals = (sum(r["status"] == "ok" and proposed(r) and r["sample"] < n_samples
                             for r in responses) if responses is not None else first)
            lines.append(_line(config, "pasbench-verify", "verify", m, proposals, avg_in + respond_out,
                               "counted" if responses is not None else "projected", tuple(f"verify_{x}" for x in seen)))
    c = pb["construct"]
    if construct_on(raw):
        points = c["knowledge_points"] if isinstance(c["knowledge_points"], int) else len(c["knowledge_points"])
        tries = c["rule_tries"]
        per_point = STAGES["pasbench-construct-text"].call("construct").per_item  # profile + log per try
        lines.append(_line(config, "pasbench-construct-text", "construct", c["generator"],
                           int(per_point * points * tries), _tokens_in("construct_log", 600), "projected"))
        lines.append(_line(config, "pasbench-review-text", "review", c["reviewer"], points,
                           _tokens_in("construct_review", log_chars), "projected"))
        if construct_on(raw, "images"):
            lines.append(_line(config, "pasbench-construct-images", "prompts",
                               c["images"].get("prompt_model") or c["generator"], points,
                               _tokens_in("construct_image_prompts", 400), "projected"))
            model, n = c["images"]["model"], points * c["images"]["max_images"]  # images endpoint: priced per image
            lines.append(Line("pasbench-construct-images:images", model, "projected",
                              role=STAGES["pasbench-construct-images"].call("images").role, prompts=(),
                              calls=n, cost_usd=config.models[model].price.per_image * n))
            if c["images"].get("check_model"):  # one vision check per first draw (redraws, up to `retries`, not projected)
                lines.append(_line(config, "pasbench-construct-images", "check", c["images"]["check_model"], n,
                                   _tokens_in("construct_image_check", 300, images=2), "projected",
                                   label="pasbench-construct-images:check"))
    budgeted = [m for m in evaluated(raw) if at_budget(config, m)]
    if budgeted:  # reasoning / thinking models with no reasoning assumption: priced at their whole budget
        note += (f"; {', '.join(budgeted)}: completions at their pasbench.model_params budget (reasoning tokens "
                 "are billed as output: an upper bound)")
    assumed = [m for m in evaluated(raw) if reasoning_budget(config, m) and not at_budget(config, m)]
    if assumed:
        note += (f"; {', '.join(assumed)}: completions at the stage's answer size plus estimate.reasoning_tokens per "
                 "call, within their pasbench.model_params budget (not the whole budget)")
    return lines, note
