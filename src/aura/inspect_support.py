"""What the families' Inspect tasks share: chat messages from rendered prompts, one structured judge call
parsed the way the LLM layer parses it (a call that fails raises, so the sample errors: the scorers fail
closed), the prompt record every task puts in its metadata, a config model as an Inspect model name with
its generation settings (the paper configs' judges and sampling) and its vendor's own base URL, the
one-line error of a task's bad input, and the rule that withholds a task's rates when its graders' answers
mostly held no verdict (VerdictCeiling, withheld), with the per-sample counts reported beside the rates by a
scorer of their own (`counts`), never as rates.

Only the families' Inspect task modules import this (Inspect is never imported by a workflow job).
"""
from __future__ import annotations

import logging
from dataclasses import asdict, dataclass
from typing import Any

from inspect_ai import Epochs
from inspect_ai._util.error import PrerequisiteError  # not re-exported; what Inspect's own input checks raise
from inspect_ai._util.exception import TerminateSampleError  # not re-exported; an operator's stop of a sample
from inspect_ai.model import (ChatMessage, ChatMessageAssistant, ChatMessageSystem, ChatMessageUser, ContentImage,
                              ContentText, GenerateConfig, Model, ResponseSchema)
from inspect_ai.scorer import SampleScore, Score, Target, metric, scorer, stderr
from inspect_ai.solver import TaskState
from inspect_ai.util import JSONSchema, LimitExceededError

from rich.markup import escape
from rich.text import Text

from .llm.structured import parse_structured
from .prompts import get_prompt, prompt_file
from .redact import redact, register_environment

# A config endpoint's `provider` (aura.llm.providers.PROVIDERS) -> the Inspect provider of the same vendor's API.
INSPECT_PROVIDERS = {"openai-reasoning": "openai", "anthropic-openai-layer": "anthropic",
                     "gemini-openai-layer": "google", "vllm": "vllm"}
# An Inspect provider -> its vendor's own API, given to a default (paper) model as its base URL, so that a base
# URL from the environment meant for the evaluated model (OPENAI_BASE_URL, ANTHROPIC_BASE_URL, GOOGLE_BASE_URL,
# INSPECT_EVAL_MODEL_BASE_URL) never sends a paper judge elsewhere. vLLM is self-hosted: it has none.
VENDOR_BASE_URLS = {"openai": "https://api.openai.com/v1", "anthropic": "https://api.anthropic.com",
                    "google": "https://generativelanguage.googleapis.com/"}
ROLES = {"system": ChatMessageSystem, "user": ChatMessageUser, "assistant": ChatMessageAssistant}
logger = logging.getLogger(__name__)


def _content(content):
    """A message's content: text, or OpenAI-style parts (text, image_url with a data URL) as Inspect's."""
    if isinstance(content, str):
        return content
    return [ContentText(text=part["text"]) if part["type"] == "text" else ContentImage(image=part["image_url"]["url"])
            for part in content]


def to_chat(messages: list[dict]) -> list[ChatMessage]:
    """Rendered prompt messages ({role, content} dicts, as the LLM layer sends them) as Inspect chat messages."""
    return [ROLES[m["role"]](content=_content(m["content"])) for m in messages]


def prompt_record(*names: str) -> dict[str, dict[str, str]]:
    """name -> {ref, file, sha256} of each prompt in the version its family's manifest selects: what a task
    puts in its metadata, as a workflow output's provenance does."""
    out = {}
    for name in names:
        p = get_prompt(name)
        out[name] = {"ref": p.ref, "file": prompt_file(name), "sha256": p.sha256}
    return out


@dataclass(frozen=True)
class Verdict:
    status: str  # ok | unparsed (a call that failed raised ModelCallFailed instead)
    value: Any  # the parsed JSON object (None unless ok)
    raw: str | None
    error: str | None  # why an answer is unparsed


UNPARSED = "grader_failed"  # Inspect's Score.reason for a grader's answer that gave no verdict


class ModelCallFailed(RuntimeError):
    """A judge's, evaluator's or emulator's call that failed after Inspect's own retries: raised out of the
    scorer (or solver), it errors the sample, so the eval ends in error and `--retry-on-error` or
    `inspect eval-retry` runs the sample again (a missing vote would be a silent, different panel)."""

    def __init__(self, what: str, cause: BaseException | str) -> None:
        why = cause if isinstance(cause, str) else f"{type(cause).__name__}: {cause}"
        register_environment()  # a server that quotes the key in its error: the line names the variable instead
        super().__init__(redact(" ".join(f"{what} failed: {why}".split())))


async def structured_call(model: Model, messages: list[dict], schema: dict | None, name: str) -> Verdict:
    """One grader's call asking for JSON under `schema` (sent as the response schema), parsed and validated by
    the LLM layer's parser: an answer not valid under the schema is `unparsed`. With no schema (a request in
    free text, e.g. upstream's own evaluator prompt) the answer comes back as it is, `ok`, for the caller's
    own parser. A call that fails raises ModelCallFailed naming the role, the model and the request (Inspect's
    limits and an operator's stop pass as they are). The model's settings are its own: a task gives them
    when it resolves the model."""
    config = GenerateConfig() if schema is None else GenerateConfig(response_schema=ResponseSchema(
        name=name, json_schema=JSONSchema.model_validate(schema), strict=True))
    try:
        output = await model.generate(to_chat(messages), config=config)
    except (LimitExceededError, TerminateSampleError):
        raise
    except Exception as exc:
        raise ModelCallFailed(f"{model.role or 'model'} {model} on {name}", exc) from None  # its text may hold a key
    text = output.completion
    if schema is None:
        return Verdict("ok", None, text, None)
    value, reason = parse_structured(text, schema)
    return Verdict("ok" if reason is None else "unparsed", value, text, reason)


def unreduced_epochs(n: int) -> Epochs:
    """`n` epochs whose scores reach the task's metric as they are, with no reducer: the metric reads a
    sample's one score (or, for PaSBench's N answers, groups the epochs itself), and Inspect's results show
    no reducer's name beside every metric."""
    return Epochs(n, [])


def mean_metrics(name: str, values: list[float], clusters: list | None = None) -> dict[str, float]:
    """`name`: the mean of the per-unit `values` (a 0/1 hit per row for a rate, a fraction per item for an
    average; NaN with none), ``<name>_stderr``: its standard error by Inspect's own `stderr` metric (with
    `clusters`, one id per value, Inspect's cluster-robust estimator; without, one unit per value), and
    ``<name>_n``: how many values. Inspect's convention: the stderr of fewer than two units (clusters) is 0."""
    if not values:
        return {name: float("nan"), f"{name}_stderr": float("nan"), f"{name}_n": 0}
    scores = [SampleScore(score=Score(value=float(v)), sample_id=i,
                          sample_metadata={"cluster": clusters[i] if clusters is not None else i})
              for i, v in enumerate(values)]
    se = stderr(cluster="cluster" if clusters is not None else None)(scores)
    return {name: sum(values) / len(values), f"{name}_stderr": float(se), f"{name}_n": len(values)}


class TaskInputError(PrerequisiteError):
    """A task's bad input (a missing file, a bad row, an empty subset), one line. Inspect prints a
    PrerequisiteError's message without a traceback (through rich: the text is escaped, so a list in
    brackets stays as written)."""

    def __init__(self, message: str) -> None:
        text = " ".join(str(message).split())
        super().__init__(escape(text))
        self.args = (text,)


def whole(name: str, value) -> int | None:
    """A task argument that counts something (`-T limit=3`): a whole number >= 1, or None when not given; any
    other value is a TaskInputError naming it."""
    if value is None or value == "":
        return None
    if isinstance(value, bool) or not str(value).strip().isdigit() or int(value) < 1:
        raise TaskInputError(f"{name}={value}: must be a whole number of at least 1")
    return int(value)


def generate_config(params: dict[str, Any], where: str) -> GenerateConfig:
    """A config's model params (temperature, max_tokens, seed, ...) as Inspect's GenerateConfig; a key it
    has no field for is an error naming `where` the params come from."""
    unknown = sorted(set(params) - set(GenerateConfig.model_fields))
    if unknown:
        raise ValueError(f"{where}: {unknown[0]!r} has no Inspect GenerateConfig field")
    return GenerateConfig(**params)


@dataclass(frozen=True)
class ConfigModel:
    """A model of an aura config as Inspect calls it: ``<provider>/<model_id>``, its params and its vendor's
    base URL (VENDOR_BASE_URLS; None for a self-hosted provider, which reads its own variable)."""
    name: str
    inspect_name: str
    config: GenerateConfig
    base_url: str | None = None


def paper_config(name: str):
    """A config of the repository's `config/` folder (e.g. ``paper.yaml``; aura.resources: a wheel's copy when
    installed), loaded and validated."""
    from .config import load_config
    from .resources import resource_path

    return load_config(resource_path("config", name))


def config_model(config, name: str, extra: dict[str, Any] | None = None) -> ConfigModel:
    """Model `name` of `config` as an Inspect model: its endpoint's provider mapped to Inspect's
    (INSPECT_PROVIDERS), its model id, its params (then `extra`, as a request's params override a
    model's in the LLM layer) as a GenerateConfig, and its vendor's base URL."""
    model = config.models[name]
    endpoint = config.endpoints[model.endpoint]
    provider = INSPECT_PROVIDERS.get(getattr(endpoint, "provider", None) or "")
    if provider is None:
        raise ValueError(f"model {name!r}: endpoint {model.endpoint!r} (provider {endpoint.provider!r}) has no "
                         f"Inspect provider here (known: {sorted(INSPECT_PROVIDERS)})")
    params = {**model.params, **(extra or {})}
    return ConfigModel(name, f"{provider}/{model.model_id}", generate_config(params, f"models.{name}.params"),
                       VENDOR_BASE_URLS.get(provider))


def agreed_params(config, names: list[str]) -> dict[str, Any]:
    """The params on which every model in `names` that sets the key agrees (a key set to two values, or
    to none, is left out): the defaults a set of configured models shares."""
    seen: dict[str, set] = {}
    for name in names:
        for key, value in config.models[name].params.items():
            seen.setdefault(key, set()).add(value)
    return {key: next(iter(values)) for key, values in sorted(seen.items()) if len(values) == 1}


def resolve_models(roles: dict[str, ConfigModel]) -> dict[str, Model]:
    """Each model role's Inspect model, resolved now: the bound model (`--model-role`), else the default.
    Either gets the default's paper params (temperature, max tokens, ...) under the settings the user gave
    in the binding (``--model-role 'judge_1={model: ..., temperature: 0.5}'``: the user's win). The default
    is sent to its vendor's base URL, never to one an environment variable names for the evaluated model.
    Resolving builds the provider's client, so a missing provider package or API key fails here, before any
    call; the default models are memoized, so a later call of this returns the same ones."""
    from inspect_ai.model import get_model, model_roles

    bound = model_roles()
    out = {}
    for role, default in roles.items():
        try:
            out[role] = (get_model(role=role, config=default.config) if role in bound else
                         get_model(role=role, default=default.inspect_name, config=default.config,
                                   base_url=default.base_url))
        except Exception as exc:  # noqa: BLE001 - a provider's own check (package, key): one line naming the role
            what = "the model bound to it" if role in bound else (
                f"{default.inspect_name}, the paper's {default.name}; bind another with --model-role {role}=...")
            text = exc.message if isinstance(exc, PrerequisiteError) else f"{type(exc).__name__}: {exc}"
            plain = Text.from_markup(text).plain if isinstance(text, str) else str(text)
            raise TaskInputError(f"model role {role} ({what}): {plain.removeprefix('ERROR: ')}") from None
    return out


# -- graders' answers without a verdict: one rule for every task ------------------------------------------------

COUNTS = "counts"  # a task scorer's Score.metadata key: this sample's counts (VERDICTS, UNPARSED_VERDICTS, ...)
CEILING = "verdict_ceiling"  # ... and the ceiling they are held to (VerdictCeiling as a dict)
VERDICTS, UNPARSED_VERDICTS = "verdicts", "verdicts_unparsed"  # graders' answers, and those with no verdict


@dataclass(frozen=True)
class VerdictCeiling:
    """How many graders' answers without a verdict an eval may have before its rates mean nothing: the
    workflow's ceiling on failed items (`llm.max_failed_share`, `llm.max_failed_items` of a config;
    LLMClient.failure_ceiling), applied to the answers that held no verdict."""
    max_failed_share: float
    max_failed_items: int

    @classmethod
    def of(cls, config) -> VerdictCeiling:
        limits = config.raw.get("llm") or {}  # a validated config: the schema's defaults filled in
        return cls(float(limits["max_failed_share"]), int(limits["max_failed_items"]))

    def allowed(self, verdicts: int) -> int:
        from .llm.client import LLMClient

        return LLMClient.failure_ceiling(self, verdicts)  # the workflow's own rule, read off these two limits


def counted(counts: dict[str, int], ceiling: VerdictCeiling) -> dict[str, Any]:
    """Score metadata with one sample's counts (at least VERDICTS and UNPARSED_VERDICTS) and its ceiling."""
    return {COUNTS: counts, CEILING: asdict(ceiling)}


def _totals(scores: list[SampleScore]) -> tuple[dict[str, int], VerdictCeiling | None]:
    totals: dict[str, int] = {}
    ceiling = None
    for s in scores:
        md = s.score.metadata or {}
        for key, n in (md.get(COUNTS) or {}).items():
            totals[key] = totals.get(key, 0) + int(n)
        ceiling = VerdictCeiling(**md[CEILING]) if CEILING in md else ceiling
    return totals, ceiling


def withheld(values: dict[str, float], scores: list[SampleScore], grader: str) -> dict[str, float]:
    """A task's rates as they are, or, when more of its graders' answers held no verdict than the ceiling
    allows, each rate and stderr NaN (the ``_n`` stay: they count samples), with one warning line saying so."""
    totals, ceiling = _totals(scores)
    unparsed, verdicts = totals.get(UNPARSED_VERDICTS, 0), totals.get(VERDICTS, 0)
    if ceiling is None or unparsed <= ceiling.allowed(verdicts):
        return values
    logger.warning(f"{unparsed} of {verdicts} {grader} answers held no verdict, over the ceiling of "
                   f"{ceiling.allowed(verdicts)} (llm.max_failed_share={ceiling.max_failed_share}, "
                   f"llm.max_failed_items={ceiling.max_failed_items}): no rate is reported (NaN)")
    return {k: v if k.endswith("_n") else float("nan") for k, v in values.items()}


@metric
def totals():
    """Each count summed over the samples (epochs included), then ``unparsed_ceiling``: the verdict-less
    answers the rule of `withheld` allows for that many verdicts."""

    def compute(scores: list[SampleScore]) -> dict[str, float]:
        sums, ceiling = _totals(scores)
        allowed = ceiling.allowed(sums.get(VERDICTS, 0)) if ceiling else 0
        return {**sums, "unparsed_ceiling": allowed}

    return compute


@scorer(metrics=[totals()])
def counts():
    """The counts the task's own scorer put in its score's metadata (COUNTS), as a score of their own: the log
    reports them beside the rates, under this scorer's name, not among them."""

    async def score(state: TaskState, target: Target) -> Score:
        found = [s.metadata for s in (state.scores or {}).values() if COUNTS in (s.metadata or {})]
        if not found:
            raise RuntimeError("counts: the task's scorer left no counts in its score's metadata")
        return Score(value=dict(found[-1][COUNTS]), metadata={COUNTS: found[-1][COUNTS], CEILING: found[-1][CEILING]})

    return score
