"""Stage pasbench-respond: the proactive setting (PaSBench §3.1, §4): N answers per item and model.

The model is a reminder assistant watching a person (an observation log, or 1-4 images), asked
nothing; it thinks, then answers with its alert or "none" (the paper's think-then-answer). Text items go to every model;
image items only to models with `vision: true`: for the others each sample is a `not_applicable` row
("model has no vision") and nothing is sent. Sample s is `LLMRequest.sample_index = s` with the
family's sampling params (`pasbench.params`) over the model's own; a model whose params fix a `seed`
gets seed + s for sample s (one seed would make the N samples one answer repeated).
N is `pasbench.samples`, or the model's `pasbench.samples_by_model` entry (per set): samples 0..N-1 of a
larger N are the same requests as at the smaller one, so a model run to 128 extends its 16.

The helpers here (config settings, answer format, image messages) are shared with judge.py and probes.py.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from aura.config import REPO_ROOT, ConfigError
from aura.llm import LLMRequest
from aura.pipeline.context import StageContext
from aura.prompts import Prompt, get_prompt

from . import samples_of

NO_VISION = "model has no vision"

# The answer format of the proactive prompts (Thought, Answer: the paper's think-then-answer) and of the
# reactive ones (Thought, Warn yes/no, Answer): the Warn line is optional here.
ANSWER = re.compile(r"Thought:(?P<thought>.*?)(?:\n\s*Warn:\s*(?P<warn>[A-Za-z]+)[^\n]*)?\n\s*Answer:(?P<answer>.*)",
                    re.DOTALL | re.IGNORECASE)
# The same shape as a GBNF grammar, for endpoints that constrain decoding (`grammar: gbnf`): one line
# each, lengths capped in characters so an answer stays within ~110 tokens on the embedded model.
ANSWER_GBNF = r"""root ::= "Thought: " thought "\nWarn: " ("yes" | "no") "\nAnswer: " answer
thought ::= [^\n \t] [^\n]{0,179}
answer ::= [^\n \t] [^\n]{0,219}
"""
# The proactive prompts' shape (v2: no Warn line): Thought, then Answer.
PROACTIVE_GBNF = ANSWER_GBNF.replace(r' "\nWarn: " ("yes" | "no")', "")


@dataclass(frozen=True)
class Parsed:
    thought: str | None
    warn: bool | None
    answer: str | None


def parse_answer(text: str | None) -> Parsed:
    """Thought / Warn / Answer of a reply. A reply without the format is kept whole as the answer
    (the judge reads what the person would read); an empty reply has no answer."""
    text = (text or "").strip()
    m = ANSWER.search(text)
    if not m:
        return Parsed(None, None, text or None)
    warn = (m.group("warn") or "").lower()
    return Parsed(m.group("thought").strip() or None, {"yes": True, "no": False}.get(warn),
                  m.group("answer").strip() or None)


def setting(config, key: str):
    """One value of the config's `pasbench` section (schema-validated, defaults filled by aura.config)."""
    section = config.section("pasbench")
    if key not in section:
        raise ConfigError(f"config lacks pasbench.{key} (the PaSBench stages read pasbench.samples, "
                          f"pasbench.params and pasbench.judge)")
    return section[key]


def model_params(config) -> dict[str, dict]:
    """`pasbench.model_params`: per model, the sampling sent instead of `pasbench.params` ({} = none)."""
    return config.section("pasbench").get("model_params") or {}


BUDGET_KEYS = ("max_tokens", "max_completion_tokens", "reasoning_effort")


def deterministic_params(config, model: str) -> dict:
    """The params of the calls a model answers at temperature 0 (knowledge probe, verify): `{temperature: 0}`;
    for a model in `pasbench.model_params` its budget keys, plus temperature 0 only when it sets a temperature
    there (one that sets none, e.g. o1, takes only its default sampling)."""
    own = model_params(config).get(model)
    if own is None:
        return {"temperature": 0.0}
    budget = {k: v for k, v in own.items() if k in BUDGET_KEYS}
    return {**budget, "temperature": 0.0} if "temperature" in own else budget


def sampling_params(config, model: str, sample: int) -> dict:
    """`pasbench.params` (or the model's `pasbench.model_params` entry instead) over the model's params for
    sample `sample` (seed + sample when seeded)."""
    own = model_params(config)
    params = dict(own[model]) if model in own else dict(setting(config, "params") or {})
    base_seed = config.models[model].params.get("seed")
    if base_seed is not None:
        params["seed"] = int(base_seed) + sample
    return params


def image_paths(item: dict) -> list[Path]:
    """The item's image files; relative paths are relative to the repository root."""
    return [Path(p) if Path(p).is_absolute() else REPO_ROOT / p for p in item.get("images") or []]


def with_images(messages: list[dict], item: dict, config) -> list[dict]:
    """The rendered messages with the item's images after the last user turn's text (content parts)."""
    from aura.llm.images import max_image_bytes, user_content  # Pillow only for jobs that send images

    *head, last = messages
    return [*head, {**last, "content": user_content(last["content"], image_paths(item),
                                                    max_image_bytes(config.raw))}]


def observation_request(item: dict, prompts: dict[str, Prompt], config, *, sample: int = 0,
                        params: dict | None = None, schema: dict | None = None, schema_name: str = "answer",
                        grammar: str | None = None, **values: str) -> LLMRequest:
    """One request showing the item's observation: the log (prompt `prompts['text']`, variable `log`)
    or the images (prompt `prompts['image']`, variable `n_images` = the item's number of sub-images, also
    when they come as one composite file; the files as content parts)."""
    if item["modality"] == "image":
        prompt = prompts["image"]
        n = item.get("n_images") or len(item["images"])
        messages = with_images(prompt.render(n_images=str(n), **values), item, config)
    else:
        prompt = prompts["text"]
        messages = prompt.render(log=item["log"], **values)
    return LLMRequest(item_id=item["item_id"], messages=messages, prompt_name=prompt.ref,
                      prompt_sha256=prompt.sha256, sample_index=sample, params=params, schema=schema,
                      schema_name=schema_name, grammar=grammar)


def can_see(config, model: str, item: dict) -> bool:
    return item["modality"] != "image" or bool(config.models[model].vision)


def run(ctx: StageContext) -> None:
    setting(ctx.config, "samples")  # a config without it stops here, naming the key
    # N per set: pasbench.samples, or the model's pasbench.samples_by_model entry (e.g. 128 for Fig. 7's curves)
    n = {m: samples_of(ctx.config.raw, ctx.model, m) for m in ("text", "image")}
    prompts = {"text": ctx.use_prompt(get_prompt("proactive_text")),
               "image": ctx.use_prompt(get_prompt("proactive_image"))}
    items = ctx.in_shard(ctx.read("items"))
    model = ctx.model
    asked = [(it, s) for it in items if can_see(ctx.config, model, it) for s in range(n[it["modality"]])]
    requests = [observation_request(it, prompts, ctx.config, sample=s, grammar=PROACTIVE_GBNF,
                                    params=sampling_params(ctx.config, model, s)) for it, s in asked]
    with ctx.llm([model]) as llm:
        results = llm.run("evaluated", model, requests) if requests else []
    answered = {(it["item_id"], s): res for (it, s), res in zip(asked, results)}
    rows = []
    for it in items:
        for s in range(n[it["modality"]]):
            base = {"item_id": it["item_id"], "model": model, "sample": s, "modality": it["modality"]}
            res = answered.get((it["item_id"], s))
            if res is None:  # an image item and a model without vision: never sent
                rows.append({**base, "status": "not_applicable", "reason": NO_VISION, "thought": None,
                             "warn": None, "answer": None, "raw": None})
                continue
            p = parse_answer(res.text) if res.status == "ok" else Parsed(None, None, None)
            rows.append({**base, "status": res.status, "reason": res.error, "thought": p.thought, "warn": p.warn,
                         "answer": p.answer, "raw": res.text})
    ctx.not_applicable = sum(r["status"] == "not_applicable" for r in rows)
    ctx.write("responses", rows, samples=n)
