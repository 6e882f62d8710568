"""`python -m aura estimate`: calls, tokens and cost a run would spend, per stage and model.

The kernel knows no family. Every enabled family (aura.families) whose manifest names an ``estimate``
hook (``"module:function"``, taking a Config, returning ``(lines, note)``) hands over its lines; the note
says where its counts came from and heads the table. A family builds its lines with the helpers here:

- ``exact_line``: requests built as the stage builds them and looked up in the cache (hits excluded);
- ``stage_line``: a stage's declared call (aura.pipeline.stage.Call: role, model, prompts, output tokens) priced
  from the counts the family supplies (calls, prompt tokens each); the model is the call's own setting's (its
  ``Call.model``, a dotted config path) or, for a call on the job's model (``--model`` / ``--judge``), the one the
  family names: a model its setting does not name is refused (``call_model``);
- ``projected_line``: ``calls`` calls of ``tokens_in_each`` prompt tokens, completions at ``out_each``;
- ``priced_line``: a line from its total tokens;
- ``completion_tokens``, ``output_cap``, ``reasoning_tokens``, ``static_prefix_tokens``, ``offline_client``,
  ``CHARS_PER_TOKEN``.

Reasoning tokens: a reasoning or thinking model bills hidden reasoning tokens as output. Until they are
measured, ``estimate.reasoning_tokens`` (``{model: tokens per call}``) assumes them: every line of a named
model adds them per call to its (visible) completion tokens, priced at the model's output price and kept
within the call's output cap (max_tokens or max_completion_tokens, which counts the reasoning too). Each
line says what it assumed (``reasoning_each``); the totals are shown with and without them.

Every line says, when it is made, the LLM-layer role of its calls (the ``role`` its stage passes to
``LLMClient.run``: judge, reviewer, classifier, generator, evaluated, ...; None for calls that are not
chat calls) and the prompts they render. ``estimate_views`` prices the batch view from the role, as the
batch runner decides (aura.llm.batch), and the prefix-cache view from the prompts; nothing is read back
from a line's display label. Spends nothing: no server is started and no request is sent.
"""
from __future__ import annotations

from dataclasses import KW_ONLY, dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

import yaml

from .config import DEFAULT_SCHEMA, Config
from .errors import ConfigError
from .prompts import get_prompt

if TYPE_CHECKING:
    from .llm import LLMClient, LLMRequest

CHARS_PER_TOKEN = 4
SAMPLE_REQUESTS = 32  # requests an exact line keeps for `aura preflight --calibrate K` (K at most this)
DEFAULT_COMPLETION_TOKENS = 150  # completion tokens of a call whose family names no size and no config key


@dataclass
class Line:
    """One stage's calls on one model. ``role`` and ``prompts`` are required: the views read them."""
    stage: str  # the display label
    model: str
    basis: str  # exact | counted | projected
    _: KW_ONLY
    role: str | None  # the LLM-layer role of the calls (LLMClient.run's role); None: not a chat call
    prompts: tuple[str, ...]  # the prompt names the calls render (the prefix-cache view averages their prefixes)
    calls: int = 0
    cached: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float = 0.0  # live, full price
    reasoning_each: int | None = None  # reasoning tokens assumed per call (in tokens_out); None: none assumed
    reasoning_tokens: int = 0  # of tokens_out: calls x reasoning_each
    reasoning_usd: float = 0.0  # of cost_usd: the reasoning tokens at the model's output price
    reasoning_batch_usd: float | None = None  # of batch_usd (and both_usd): the same through the Batch API
    batch_usd: float | None = None  # through the Batch API where the line can be (estimate_views)
    cached_usd: float | None = None  # live, the static prompt prefix partly at price.cached_input
    both_usd: float | None = None  # both levers
    measured_calls: int = 0  # > 0: tokens per call measured from that many logged calls (apply_measured)
    sample: list = field(default_factory=list, repr=False)  # exact lines: their first uncached requests

    def __post_init__(self) -> None:
        if isinstance(self.prompts, str):
            raise TypeError(f"Line '{self.stage}': prompts is a sequence of prompt names, "
                            f"not the string {self.prompts!r}")
        self.prompts = tuple(self.prompts)


class Estimate(list):
    """The estimate's lines; ``note`` says where each family's counts came from."""

    note: str = ""


# --- helpers the families build their lines with ----------------------------------------------------

def offline_client(config: Config) -> "LLMClient":
    """A client for `prepare` and cache look-ups only: never entered, so no server starts and no request goes."""
    from .llm import Cache, LLMClient

    return LLMClient(config, Cache(config.paths["cache"]))


def output_cap(params: dict | None) -> int | None:
    """The output cap of a call's params: max_tokens or max_completion_tokens (a reasoning model's cap, which
    counts its reasoning too; OpenAI's o-series and GPT-5 take only it), the smaller when both are set; None
    when neither is."""
    caps = [v for v in ((params or {}).get("max_tokens"), (params or {}).get("max_completion_tokens")) if v]
    return min(caps) if caps else None


def completion_tokens(config: Config, key: str, model: str, default: int = DEFAULT_COMPLETION_TOKENS,
                      max_tokens: int | None = None) -> int:
    """Completion tokens per call (the visible answer): ``estimate.completion_tokens[key]`` (else ``default``),
    capped by ``max_tokens`` when given, else by the model's max_tokens / max_completion_tokens (output_cap)."""
    out = config.raw["estimate"]["completion_tokens"].get(key, default)
    cap = max_tokens or output_cap(config.models[model].params)
    return min(out, cap) if cap else out


def reasoning_assumptions(config: Config) -> dict[str, int]:
    """``estimate.reasoning_tokens``: reasoning tokens per call by model; a name not under models: is an error."""
    assumed = (config.raw.get("estimate") or {}).get("reasoning_tokens") or {}
    unknown = sorted(set(assumed) - set(config.models))
    if unknown:
        raise ConfigError(f"estimate.reasoning_tokens: unknown model(s) {', '.join(unknown)} (not under models:)")
    return assumed


def reasoning_tokens(config: Config, model: str, out_each: int = 0, max_tokens: int | None = None) -> int | None:
    """Reasoning tokens assumed per call of ``model``: ``estimate.reasoning_tokens[model]``, cut so that the
    call's completion (``out_each`` visible tokens + reasoning) stays within its output cap (``max_tokens``
    when given, else the model's max_tokens / max_completion_tokens); None when the model is not named there."""
    each = reasoning_assumptions(config).get(model)
    if each is None:
        return None
    cap = max_tokens or output_cap(config.models[model].params)
    return max(0, min(each, cap - out_each)) if cap else each


def _add_reasoning(config: Config, line: Line, each: int | None) -> Line:
    """Add ``each`` reasoning tokens per call of the line to its completion tokens and cost (output price)."""
    line.reasoning_each = each
    if each:
        line.reasoning_tokens = line.calls * each
        line.reasoning_usd = config.models[line.model].price.cost(0, line.reasoning_tokens)
        line.tokens_out += line.reasoning_tokens
        line.cost_usd += line.reasoning_usd
    return line


def priced_line(config: Config, stage: str, model: str, basis: str, *, role: str | None, prompts: Sequence[str],
                calls: int, tokens_in: int, tokens_out: int, max_tokens: int | None = None) -> Line:
    """A line from its totals, at the model's live price: ``tokens_out`` visible completion tokens, plus the
    reasoning tokens assumed per call for the model (``reasoning_tokens``, within ``max_tokens`` when given,
    else the model's cap)."""
    line = Line(stage, model, basis, role=role, prompts=prompts, calls=calls, tokens_in=tokens_in,
                tokens_out=tokens_out, cost_usd=config.models[model].price.cost(tokens_in, tokens_out))
    each = reasoning_tokens(config, model, tokens_out // calls if calls else 0, max_tokens)
    return _add_reasoning(config, line, each)


def projected_line(config: Config, stage: str, model: str, calls: int, tokens_in_each: int, *, role: str | None,
                   prompts: Sequence[str], out_each: int, basis: str = "projected",
                   max_tokens: int | None = None) -> Line:
    """``calls`` calls of ``tokens_in_each`` prompt tokens and ``out_each`` completion tokens each (plus the
    reasoning tokens assumed for the model, within ``max_tokens`` when given: priced_line)."""
    return priced_line(config, stage, model, basis, role=role, prompts=prompts, calls=calls,
                       tokens_in=calls * tokens_in_each, tokens_out=calls * out_each, max_tokens=max_tokens)


def declared_call(stage: str, kind: str):
    """The ``kind`` call a stage declares (aura.pipeline.stage.Call), and the stage."""
    from .pipeline.registry import STAGES

    return STAGES[stage].call(kind), STAGES[stage]


def call_models(config: Config, stage: str, kind: str) -> list[str] | None:
    """The models a declared call goes to by its ``Call.model``: those its config setting names (a dotted path to one
    model or a list of them); None for a call on the job's own model (``--model`` / ``--judge``) or a setting left
    unset (the family's own fallback then decides, e.g. a prompt model that defaults to the generator)."""
    from .families.derive import setting

    call, _ = declared_call(stage, kind)
    if call.model.startswith("--"):
        return None
    value = setting(config.raw, call.model)
    if not value:
        return None
    return [value] if isinstance(value, str) else list(value)


def call_model(config: Config, stage: str, kind: str, model: str | None) -> str:
    """The model a line of a declared call prices: ``model``, which must be one its setting names (call_models),
    or, when None, the one model that setting names. A mismatch is a family's estimate pricing calls on a model
    its stage never sends them to: ValueError."""
    named = call_models(config, stage, kind)
    where = f"stage {stage}: its {kind} call's model ({declared_call(stage, kind)[0].model})"
    if model is None:
        if not named or len(named) != 1:
            raise ValueError(f"{where} names {named or 'no model'}: the estimate needs one")
        return named[0]
    if named is not None and model not in named:
        raise ValueError(f"{where} is {', '.join(named)}, not '{model}'")
    return model


def call_out_tokens(config: Config, stage: str, kind: str, model: str | None, max_tokens: int | None = None) -> int:
    """Completion tokens per call of a declared call: ``estimate.completion_tokens["<stage>:<kind>"]``, else the
    call's ``out_tokens``, capped by ``max_tokens`` (else the model's cap): completion_tokens. ``model``: call_model."""
    call, _ = declared_call(stage, kind)
    model = call_model(config, stage, kind, model)
    return completion_tokens(config, f"{stage}:{kind}", model, call.out_tokens, max_tokens=max_tokens)


def stage_line(config: Config, stage: str, kind: str, model: str | None, calls: int, tokens_in_each: int, *,
               label: str | None = None, basis: str = "projected", prompts: Sequence[str] | None = None,
               max_tokens: int | None = None, out_each: int | None = None) -> Line:
    """A line of ``calls`` calls of the ``kind`` call ``stage`` declares (its Stage.calls): the call's model
    (call_model: ``model``, checked against the call's setting, or None for that setting's one model), its role,
    its prompts (or the subset ``prompts`` the counted items render), its completion tokens (call_out_tokens, or
    ``out_each``), priced as projected_line. The family supplies only the counts; ``label`` is the display
    name (default: the stage)."""
    call, st = declared_call(stage, kind)
    model = call_model(config, stage, kind, model)
    return projected_line(config, label or stage, model, calls, tokens_in_each, role=call.role,
                          prompts=tuple(prompts if prompts is not None else call.prompts or st.prompts),
                          out_each=out_each or call_out_tokens(config, stage, kind, model, max_tokens),
                          basis=basis, max_tokens=max_tokens)


def exact_line(config: Config, client: "LLMClient", stage: str, model: str, requests: Sequence["LLMRequest"], *,
               role: str | None, prompts: Sequence[str], out_each: int, max_tokens: int | None = None) -> Line:
    """The requests as the stage sends them (``client.prepare``), cache hits counted apart: prompt tokens
    from the messages' characters (CHARS_PER_TOKEN), ``out_each`` completion tokens per uncached call, plus the
    reasoning tokens assumed for the model (``reasoning_tokens``, within ``max_tokens`` when given)."""
    line = Line(stage, model, "exact", role=role, prompts=prompts)
    price = config.models[model].price
    for req in requests:
        messages, _, _, key = client.prepare(model, req)
        if client.cache.contains(key):
            line.cached += 1
            continue
        tin = sum(len(m["content"]) for m in messages) // CHARS_PER_TOKEN
        if len(line.sample) < SAMPLE_REQUESTS:
            line.sample.append(req)
        line.calls += 1
        line.tokens_in += tin
        line.tokens_out += out_each
        line.cost_usd += price.cost(tin, out_each)
    return _add_reasoning(config, line, reasoning_tokens(config, model, out_each, max_tokens))


def static_prefix_tokens(name: str) -> int:
    """Tokens of a prompt before its first variable (system and user text): the part every call of the
    prompt shares, which a provider's prefix cache can serve (chars / CHARS_PER_TOKEN)."""
    p = get_prompt(name)
    text = (p.system or "") + "\n" + (p.user or "")
    cut = text.find("{{")
    return (len(text) if cut < 0 else cut) // CHARS_PER_TOKEN


# --- the estimate ---------------------------------------------------------------------------------

def estimate(config: Config) -> Estimate:
    """Every enabled family's lines (its manifest's `estimate` hook), with their batch and prefix-cache
    costs (estimate_views)."""
    reasoning_assumptions(config)  # an unknown model named there stops the estimate before any line
    lines = family_lines(config)
    apply_measured(config, lines, measured_calls(config))
    estimate_views(config, lines)
    return lines


# --- measured tokens: what logged calls used, in place of the assumptions ------------------------------

def _prompt_base(name: str) -> str:
    """A prompt reference without its version: "judge_safety.v2" -> "judge_safety"."""
    head, _, tail = name.rpartition(".v")
    return head if head and tail.isdigit() else name


def measured_calls(config: Config) -> dict[tuple[str, str, str], list[dict]]:
    """The answered calls logged under paths.logs (every job's ``*.calls.jsonl``, `aura preflight --calibrate`'s
    too) by (model, role, prompt without version): the first answer of each call that reached a server (no cache
    hit, no repair, status ok)."""
    from .io import read_jsonl

    out: dict[tuple[str, str, str], list[dict]] = {}
    logs = Path(config.paths["logs"])
    for path in sorted(logs.rglob("*.calls.jsonl")) if logs.is_dir() else []:
        try:
            records = list(read_jsonl(path))
        except (OSError, ValueError):
            continue  # a log cut short by a kill: its calls are not evidence
        for rec in records:
            if (rec.get("cache_hit") or rec.get("purpose") != "answer" or rec.get("status") != "ok"
                    or not rec.get("prompt_name")):
                continue
            key = (rec.get("model"), rec.get("role"), _prompt_base(rec["prompt_name"]))
            out.setdefault(key, []).append(rec)
    return out


def apply_measured(config: Config, lines: list[Line], measured: dict[tuple[str, str, str], list[dict]]) -> None:
    """Reprice each line whose (model, role, one of its prompts) has logged calls at their mean prompt, completion
    and reasoning tokens per call (completion includes reasoning, as the servers bill it). The line's basis (how
    its calls were counted) stays; ``measured_calls`` says how many logged calls its tokens come from."""
    for ln in lines:
        if ln.role is None or ln.model not in config.models or not ln.calls:
            continue
        recs = [r for p in ln.prompts for r in measured.get((ln.model, ln.role, _prompt_base(p)), [])]
        if not recs:
            continue
        n = len(recs)
        mean_in = sum(r.get("tokens_in") or 0 for r in recs) / n
        mean_out = sum(r.get("tokens_out") or 0 for r in recs) / n
        reported = [r["tokens_reasoning"] for r in recs if r.get("tokens_reasoning") is not None]
        price = config.models[ln.model].price
        ln.tokens_in, ln.tokens_out = round(ln.calls * mean_in), round(ln.calls * mean_out)
        ln.reasoning_each = round(sum(reported) / len(reported)) if reported else None
        ln.reasoning_tokens = ln.calls * (ln.reasoning_each or 0)
        ln.cost_usd = price.cost(ln.tokens_in, ln.tokens_out)
        ln.reasoning_usd = price.cost(0, ln.reasoning_tokens)
        ln.measured_calls = n


def derived_lines(config: Config, family) -> tuple[list[Line], str]:
    """The lines of a family without an estimate hook, from its stages' declarations (aura.families.derive): per
    stage that runs, its items are the rows of its first input the config names as a file (a JSONL file: one item
    a line); each call is ``per_item`` calls an item per job, on each job's model (a per-model call) or on its
    setting's model; a call's prompt tokens are its prompts' text and an item's mean length (CHARS_PER_TOKEN)."""
    from .families.derive import per_model_path, setting, stage_models

    lines, counted = [], []
    for name, st in family.stages.items():
        jobs = stage_models(family, st, config.raw)
        files = [setting(config.raw, f"{family.name}.{i}") for i, key in st.inputs.items() if key is None]
        path = next((Path(f) for f in files if f and Path(f).is_file()), None)
        if not st.calls or not jobs or path is None:
            continue
        rows = [ln for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip()]
        item_tokens = sum(map(len, rows)) // max(len(rows), 1) // CHARS_PER_TOKEN
        counted.append(f"{name}: {len(rows)} items of {path}")
        for kind, call in st.calls.items():
            tokens = sum(static_prefix_tokens(p) for p in call.prompts or st.prompts) + item_tokens
            each = round(len(rows) * call.per_item)
            if call.model == per_model_path(family, st):
                lines += [stage_line(config, name, kind, m, each, tokens) for m in jobs]
            else:
                lines.append(stage_line(config, name, kind, None, each * len(jobs), tokens))
    return lines, f"{family.name} (from its stages): {'; '.join(counted)}" if counted else ""


def family_lines(config: Config) -> Estimate:
    from .families import enabled
    from .families.base import load_target

    lines, notes = Estimate(), []
    for family in enabled(config.raw):
        more, note = load_target(family.estimate)(config) if family.estimate else derived_lines(config, family)
        for ln in more:
            if not isinstance(ln, Line):
                raise TypeError(f"family '{family.name}': its estimate hook {family.estimate} returned "
                                f"{type(ln).__name__}, not aura.estimate.Line")
        lines += more
        if note:
            notes.append(note)
    lines.note = "; ".join(notes)
    return lines


@lru_cache(maxsize=None)
def batch_roles() -> tuple[str, ...]:
    """The roles the Batch API takes: the values `llm.batch.roles` allows (config/schema.yaml)."""
    schema = yaml.safe_load(DEFAULT_SCHEMA.read_text())
    return tuple(schema["properties"]["llm"]["properties"]["batch"]["properties"]["roles"]["items"]["enum"])


def _batch_endpoint(config: Config, model: str) -> bool:
    """The endpoint takes the Batch API as the batch runner sends it (aura.llm.batch.BatchRunner.applies)."""
    ep = config.endpoints[config.models[model].endpoint]
    return ep.batch_api is not None and ep.kind == "openai"


def batchable(config: Config, line: Line) -> bool:
    """The line's calls can go through the Batch API: its role is one the Batch API takes and its model's
    endpoint names a batch API (`batch: true | openai | anthropic`; the rule of aura.llm.batch.BatchRunner.applies)."""
    return line.role in batch_roles() and line.model in config.models and _batch_endpoint(config, line.model)


def estimate_views(config: Config, lines: list[Line]) -> None:
    """Fill each line's batch, cached and batch+cached cost.

    batch: the line's calls at (1 - price.batch_discount) when `batchable` (its role is one the Batch API
    takes, its endpoint names a batch API). cached: per call, estimate.prefix_cache_hit_share of the mean
    static prefix of the line's prompts at price.cached_input (not when that prefix is under
    estimate.prefix_cache_min_tokens, or the model has no cached_input price). Both: cached, then batch.
    The line's assumed reasoning tokens are output: batch discounts them, the prefix cache does not
    (reasoning_batch_usd; the totals without them subtract these).
    """
    est = config.raw["estimate"]
    share, min_tokens = est.get("prefix_cache_hit_share", 0.9), est.get("prefix_cache_min_tokens", 1024)
    for ln in lines:
        model = config.models.get(ln.model)
        if model is None:
            ln.batch_usd = ln.cached_usd = ln.both_usd = ln.cost_usd
            ln.reasoning_batch_usd = ln.reasoning_usd
            continue
        price = model.price
        prefix = sum(static_prefix_tokens(p) for p in ln.prompts) // max(1, len(ln.prompts))
        cached_each = (round(share * prefix) if ln.prompts and prefix >= min_tokens and price.cached_input is not None
                       else 0)
        saved = min(ln.tokens_in, ln.calls * cached_each) * (price.input_per_mtok - (price.cached_input or 0)) / 1e6
        ln.cached_usd = ln.cost_usd - saved
        factor = 1.0 - price.batch_discount if batchable(config, ln) else 1.0
        ln.batch_usd, ln.both_usd = ln.cost_usd * factor, ln.cached_usd * factor
        ln.reasoning_batch_usd = ln.reasoning_usd * factor  # output tokens: no prefix-cache discount


def _views_note(config: Config, lines: list[Line]) -> list[str]:
    est = config.raw["estimate"]
    roles = config.raw.get("llm", {}).get("batch", {}).get("roles") or []
    live_only: dict[str, float] = {}
    for ln in lines:
        model = config.models.get(ln.model)
        if model is not None and ln.role in batch_roles() and not _batch_endpoint(config, ln.model):
            live_only[model.endpoint] = live_only.get(model.endpoint, 0.0) + ln.cost_usd
    rows = [
        f"live = full price; batch = the calls of the roles the Batch API takes ({', '.join(batch_roles())}; "
        "single-turn) at each model's price.batch_discount (default 50%: OpenAI's and Gemini's Batch API, Anthropic's "
        "Message Batches) where the endpoint names a batch API (batch: true | openai | anthropic); cached = "
        f"{est.get('prefix_cache_hit_share', 0.9):.0%} of each call's static prompt prefix (the rubric before the first "
        "variable) at price.cached_input (estimate.prefix_cache_hit_share; a prefix under "
        f"{est.get('prefix_cache_min_tokens', 1024)} tokens gets none: OpenAI caches from 1,024 tokens on); "
        "batch+cached = both, the cache discount assumed to hold inside a batch.",
        f"this config sends through the Batch API: {', '.join(roles) if roles else 'nothing'} (llm.batch.roles)",
    ]
    live_only = {ep: usd for ep, usd in live_only.items() if usd > 0}
    if live_only:
        rows.append("batchable calls on endpoints without a batch API (stay at live price): " + ", ".join(
            f"{ep} ${usd:,.2f}" for ep, usd in sorted(live_only.items(), key=lambda x: -x[1])))
    return rows


def _reasoning_cell(ln: Line, assumed: dict[str, int]) -> str:
    """The line's reasoning column: the tokens assumed per call, 'cap' when its output cap cut them, or none."""
    if ln.measured_calls:
        return "none*" if ln.reasoning_each is None else f"{ln.reasoning_each}*"
    if ln.reasoning_each is None:
        return "none"
    cut = ln.reasoning_each < assumed.get(ln.model, ln.reasoning_each)
    return f"{ln.reasoning_each}{' cap' if cut else ''}"


def totals(lines: list[Line]) -> dict[str, dict[str, float]]:
    """The estimate's totals, with the reasoning tokens assumed and without them: {"with"|"reasoning"|"without":
    {"tokens_out", "cost_usd", "batch_usd", "cached_usd", "both_usd"}} (a view not filled counts the live cost)."""
    def view(ln: Line, name: str) -> float:
        v = getattr(ln, name)
        return ln.cost_usd if v is None else v

    def reasoning(ln: Line, name: str) -> float:
        if name in ("batch_usd", "both_usd"):  # the prefix cache discounts input only: cached keeps them whole
            return ln.reasoning_usd if ln.reasoning_batch_usd is None else ln.reasoning_batch_usd
        return ln.reasoning_usd

    names = ("cost_usd", "batch_usd", "cached_usd", "both_usd")
    out = {"with": {"tokens_out": sum(ln.tokens_out for ln in lines), **{n: sum(view(ln, n) for ln in lines)
                                                                          for n in names}},
           "reasoning": {"tokens_out": sum(ln.reasoning_tokens for ln in lines),
                         **{n: sum(reasoning(ln, n) for ln in lines) for n in names}}}
    out["without"] = {k: out["with"][k] - out["reasoning"][k] for k in out["with"]}
    return out


def format_estimate(lines: list[Line], config: Config | None = None) -> str:
    note = getattr(lines, "note", "")
    assumed = reasoning_assumptions(config) if config is not None else {}
    head = (f"{'stage':<34} {'model':<26} {'basis':<10} {'calls':>8} {'cached':>7} {'tokens_in':>11} {'tokens_out':>11} "
            f"{'reason/call':>11} {'cost_usd':>10} {'batch_usd':>10} {'cached_usd':>10} {'batch+cached':>12}")

    def views(x) -> str:
        b, c, bc = (x.cost_usd if v is None else v for v in (x.batch_usd, x.cached_usd, x.both_usd))
        return f" {b:>10.4f} {c:>10.4f} {bc:>12.4f}"

    rows = ([note] if note else []) + [head, "-" * len(head)]
    for ln in lines:
        rows.append(f"{ln.stage:<34} {ln.model:<26} {ln.basis + ('*' if ln.measured_calls else ''):<10} {ln.calls:>8} {ln.cached:>7} "
                    f"{ln.tokens_in:>11} {ln.tokens_out:>11} {_reasoning_cell(ln, assumed):>11} "
                    f"{ln.cost_usd:>10.4f}" + views(ln))
    tot = totals(lines)
    calls, cached, tokens_in = (sum(getattr(x, k) for x in lines) for k in ("calls", "cached", "tokens_in"))
    rows.append("-" * len(head))

    def total_row(label: str, t: dict, counts: bool = True) -> str:
        c = (f"{calls:>8} {cached:>7} {tokens_in:>11}" if counts else f"{'':>8} {'':>7} {'':>11}")
        return (f"{label:<34} {'':<26} {'':<10} {c} {t['tokens_out']:>11.0f} {'':>11} {t['cost_usd']:>10.4f} "
                f"{t['batch_usd']:>10.4f} {t['cached_usd']:>10.4f} {t['both_usd']:>12.4f}")

    rows.append(total_row("TOTAL", tot["with"]))
    if any(ln.reasoning_tokens for ln in lines):
        rows.append(total_row("  of which reasoning", tot["reasoning"], counts=False))
        rows.append(total_row("TOTAL without reasoning tokens", tot["without"]))
    rows.append("exact = requests built and checked against the cache (hits excluded); counted = calls counted "
                "from the stage's input file (cache not checked, first answers only); projected = inputs not "
                "produced yet, from the counts named above and each family's assumptions (<family>.estimate in "
                "the config); * = measured: the line's calls counted as its basis says, their prompt, output and reasoning "
                "tokens per call the mean of the answered calls logged under paths.logs for the same model, role "
                "and prompt (a run's calls logs, or `aura preflight --calibrate K`)")
    measured = [ln for ln in lines if ln.measured_calls]
    if measured:
        rows.append(f"{len(measured)} of {len(lines)} lines measured (from {sum(ln.measured_calls for ln in measured)} "
                    "logged calls); the others assumed")
    named = ", ".join(f"{m} {n}" for m, n in assumed.items()) or "none"
    rows.append("reason/call = hidden reasoning tokens assumed per call (estimate.reasoning_tokens, until measured: "
                f"{named}), priced at the model's output price and included in tokens_out; 'cap' = cut to fit the "
                "call's max_tokens / max_completion_tokens; none = no reasoning tokens assumed for the model; '*' = "
                "measured: the mean the logged calls' servers reported (none*: they reported none)")
    if config is not None:
        rows += _views_note(config, lines)
        rows += _by_endpoint(config, lines)
    return "\n".join(rows)


def by_endpoint(config: Config, lines: list[Line]) -> dict[str, dict[str, float]]:
    """Live, batch, cached and batch+cached cost per endpoint (the provider the calls go to), reasoning included."""
    out: dict[str, dict[str, float]] = {}
    for ln in lines:
        model = config.models.get(ln.model)
        ep = model.endpoint if model is not None else "?"
        row = out.setdefault(ep, {"calls": 0, "cost_usd": 0.0, "batch_usd": 0.0, "cached_usd": 0.0, "both_usd": 0.0})
        row["calls"] += ln.calls
        for name in ("cost_usd", "batch_usd", "cached_usd", "both_usd"):
            value = getattr(ln, name)
            row[name] += ln.cost_usd if value is None else value
    return out


def _by_endpoint(config: Config, lines: list[Line]) -> list[str]:
    rows = sorted(by_endpoint(config, lines).items(), key=lambda kv: -kv[1]["cost_usd"])
    return ["by endpoint (live / batch / cached / batch+cached, USD): " + "; ".join(
        f"{ep} {r['calls']} calls ${r['cost_usd']:,.2f} / ${r['batch_usd']:,.2f} / ${r['cached_usd']:,.2f} / "
        f"${r['both_usd']:,.2f}" for ep, r in rows if r["calls"])] if rows else []
