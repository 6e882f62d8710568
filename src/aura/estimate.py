"""`python -m aura estimate`: calls, tokens and cost a run would spend, per stage and model.

The kernel knows no family. Every enabled family (aura.families) whose manifest names an ``estimate``
hook (``"module:function"``, taking a Config, returning ``(lines, note)``) hands over its lines; the note
says where its counts came from and heads the table. A family builds its lines with the helpers here:

- ``exact_line``: requests built as the stage builds them and looked up in the cache (hits excluded);
- ``projected_line``: ``calls`` calls of ``tokens_in_each`` prompt tokens, completions at ``out_each``;
- ``priced_line``: a line from its total tokens;
- ``completion_tokens``, ``static_prefix_tokens``, ``offline_client``, ``CHARS_PER_TOKEN``.

Every line says, when it is made, the LLM-layer role of its calls (the ``role`` its stage passes to
``LLMClient.run``: judge, reviewer, classifier, generator, evaluated, ...; None for calls that are not
chat calls) and the prompts they render. ``estimate_views`` prices the batch view from the role, as the
batch runner decides (aura.llm.batch), and the prefix-cache view from the prompts; nothing is read back
from a line's display label. Spends nothing: no server is started and no request is sent.
"""
from __future__ import annotations

from dataclasses import KW_ONLY, dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Sequence

import yaml

from .config import DEFAULT_SCHEMA, Config
from .prompts import get_prompt

if TYPE_CHECKING:
    from .llm import LLMClient, LLMRequest

CHARS_PER_TOKEN = 4
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
    batch_usd: float | None = None  # through the Batch API where the line can be (estimate_views)
    cached_usd: float | None = None  # live, the static prompt prefix partly at price.cached_input
    both_usd: float | None = None  # both levers

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


def completion_tokens(config: Config, key: str, model: str, default: int = DEFAULT_COMPLETION_TOKENS,
                      max_tokens: int | None = None) -> int:
    """Completion tokens per call: ``estimate.completion_tokens[key]`` (else ``default``), capped by
    ``max_tokens`` when given, else by the model's max_tokens / max_completion_tokens."""
    params = config.models[model].params
    out = config.raw["estimate"]["completion_tokens"].get(key, default)
    cap = max_tokens or params.get("max_tokens") or params.get("max_completion_tokens")
    return min(out, cap) if cap else out


def priced_line(config: Config, stage: str, model: str, basis: str, *, role: str | None, prompts: Sequence[str],
                calls: int, tokens_in: int, tokens_out: int) -> Line:
    """A line from its totals, at the model's live price."""
    return Line(stage, model, basis, role=role, prompts=prompts, calls=calls, tokens_in=tokens_in,
                tokens_out=tokens_out, cost_usd=config.models[model].price.cost(tokens_in, tokens_out))


def projected_line(config: Config, stage: str, model: str, calls: int, tokens_in_each: int, *, role: str | None,
                   prompts: Sequence[str], out_each: int, basis: str = "projected") -> Line:
    """``calls`` calls of ``tokens_in_each`` prompt tokens and ``out_each`` completion tokens each."""
    return priced_line(config, stage, model, basis, role=role, prompts=prompts, calls=calls,
                       tokens_in=calls * tokens_in_each, tokens_out=calls * out_each)


def exact_line(config: Config, client: "LLMClient", stage: str, model: str, requests: Sequence["LLMRequest"], *,
               role: str | None, prompts: Sequence[str], out_each: int) -> Line:
    """The requests as the stage sends them (``client.prepare``), cache hits counted apart: prompt tokens
    from the messages' characters (CHARS_PER_TOKEN), ``out_each`` completion tokens per uncached call."""
    line = Line(stage, model, "exact", role=role, prompts=prompts)
    price = config.models[model].price
    for req in requests:
        messages, _, _, key = client.prepare(model, req)
        if client.cache.contains(key):
            line.cached += 1
            continue
        tin = sum(len(m["content"]) for m in messages) // CHARS_PER_TOKEN
        line.calls += 1
        line.tokens_in += tin
        line.tokens_out += out_each
        line.cost_usd += price.cost(tin, out_each)
    return line


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
    lines = family_lines(config)
    estimate_views(config, lines)
    return lines


def family_lines(config: Config) -> Estimate:
    from .families import enabled
    from .families.base import load_target

    lines, notes = Estimate(), []
    for family in enabled(config.raw):
        if family.estimate is None:
            continue
        more, note = load_target(family.estimate)(config)
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
    return bool(ep.batch) and ep.kind == "openai"


def batchable(config: Config, line: Line) -> bool:
    """The line's calls can go through the Batch API: its role is one the Batch API takes and its model's
    endpoint says `batch: true` (the rule of aura.llm.batch.BatchRunner.applies)."""
    return line.role in batch_roles() and line.model in config.models and _batch_endpoint(config, line.model)


def estimate_views(config: Config, lines: list[Line]) -> None:
    """Fill each line's batch, cached and batch+cached cost.

    batch: the line's calls at (1 - price.batch_discount) when `batchable` (its role is one the Batch API
    takes, its endpoint says `batch: true`). cached: per call, estimate.prefix_cache_hit_share of the mean
    static prefix of the line's prompts at price.cached_input (not when that prefix is under
    estimate.prefix_cache_min_tokens, or the model has no cached_input price). Both: cached, then batch.
    """
    est = config.raw["estimate"]
    share, min_tokens = est.get("prefix_cache_hit_share", 0.9), est.get("prefix_cache_min_tokens", 1024)
    for ln in lines:
        model = config.models.get(ln.model)
        if model is None:
            ln.batch_usd = ln.cached_usd = ln.both_usd = ln.cost_usd
            continue
        price = model.price
        prefix = sum(static_prefix_tokens(p) for p in ln.prompts) // max(1, len(ln.prompts))
        cached_each = (round(share * prefix) if ln.prompts and prefix >= min_tokens and price.cached_input is not None
                       else 0)
        saved = min(ln.tokens_in, ln.calls * cached_each) * (price.input_per_mtok - (price.cached_input or 0)) / 1e6
        ln.cached_usd = ln.cost_usd - saved
        factor = 1.0 - price.batch_discount if batchable(config, ln) else 1.0
        ln.batch_usd, ln.both_usd = ln.cost_usd * factor, ln.cached_usd * factor


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
        "single-turn) at each model's price.batch_discount (default 50%, OpenAI and Gemini Batch API) where the "
        "endpoint says batch: true; cached = "
        f"{est.get('prefix_cache_hit_share', 0.9):.0%} of each call's static prompt prefix (the rubric before the first "
        "variable) at price.cached_input (estimate.prefix_cache_hit_share; a prefix under "
        f"{est.get('prefix_cache_min_tokens', 1024)} tokens gets none: OpenAI caches from 1,024 tokens on); "
        "batch+cached = both, the cache discount assumed to hold inside a batch.",
        f"this config sends through the Batch API: {', '.join(roles) if roles else 'nothing'} (llm.batch.roles)",
    ]
    live_only = {ep: usd for ep, usd in live_only.items() if usd > 0}
    if live_only:
        rows.append("batchable calls on endpoints without batch: true (stay at live price): " + ", ".join(
            f"{ep} ${usd:,.2f}" for ep, usd in sorted(live_only.items(), key=lambda x: -x[1])))
    return rows


def format_estimate(lines: list[Line], config: Config | None = None) -> str:
    note = getattr(lines, "note", "")
    head = (f"{'stage':<34} {'model':<26} {'basis':<9} {'calls':>8} {'cached':>7} {'tokens_in':>11} {'tokens_out':>11} "
            f"{'cost_usd':>10} {'batch_usd':>10} {'cached_usd':>10} {'batch+cached':>12}")

    def views(x) -> str:
        b, c, bc = (x.cost_usd if v is None else v for v in (x.batch_usd, x.cached_usd, x.both_usd))
        return f" {b:>10.4f} {c:>10.4f} {bc:>12.4f}"

    rows = ([note] if note else []) + [head, "-" * len(head)]
    for ln in lines:
        rows.append(f"{ln.stage:<34} {ln.model:<26} {ln.basis:<9} {ln.calls:>8} {ln.cached:>7} "
                    f"{ln.tokens_in:>11} {ln.tokens_out:>11} {ln.cost_usd:>10.4f}" + views(ln))
    tot = Line("TOTAL", "", "", role=None, prompts=(), calls=sum(x.calls for x in lines),
               cached=sum(x.cached for x in lines), tokens_in=sum(x.tokens_in for x in lines),
               tokens_out=sum(x.tokens_out for x in lines), cost_usd=sum(x.cost_usd for x in lines))
    rows.append("-" * len(head))
    for name in ("batch_usd", "cached_usd", "both_usd"):
        setattr(tot, name, sum(ln.cost_usd if getattr(ln, name) is None else getattr(ln, name) for ln in lines))
    rows.append(f"{tot.stage:<34} {'':<26} {'':<9} {tot.calls:>8} {tot.cached:>7} {tot.tokens_in:>11} "
                f"{tot.tokens_out:>11} {tot.cost_usd:>10.4f}" + views(tot))
    rows.append("exact = requests built and checked against the cache (hits excluded); counted = calls counted "
                "from the stage's input file (cache not checked, first answers only); projected = inputs not "
                "produced yet, from the counts named above and each family's assumptions (<family>.estimate in "
                "the config)")
    if config is not None:
        rows += _views_note(config, lines)
    return "\n".join(rows)
