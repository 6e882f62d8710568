"""What a provider's OpenAI-compatible endpoint does with a chat request's parameters, checked before any call.

An endpoint may name its provider (`endpoints.<e>.provider`; null = no rules). For every model the config
lists, the params its calls send are checked against that provider's rules: the model's own
`models.<m>.params`, and, for each enabled family whose section follows the shared convention, the section's
`params` (sent, over the model's, to each model in its `evaluated` list that has no `model_params` entry) and
`model_params.<m>` (sent instead, to model m). top_k / min_p in a family's params reach only endpoints that
take them (`extra_sampling`), so they are left out of the check elsewhere. A parameter the provider refuses,
ignores or clamps is one line naming the config key, the model, the parameter, the provider's rule and the
fix; `aura.config.validate_config` raises them together, so every stage and `aura estimate` stop before any
call. The endpoint's own settings are checked too (`batch`, `structured_output`).

The rules lie below both the config, which checks them when it is read, and the LLM layer, which adapts to
some models (aura.llm.providers); this module imports nothing of the package.

Each rule cites the provider's page it comes from. aura.simulator.profiles encodes the same behaviours on the
server side, independently, and the tests send every shipped paper config's params through the real client
to a fake server running its endpoint's profile.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Iterator

# --- documentation each rule comes from ----------------------------------------------------------------------
OPENAI_REASONING = "https://platform.openai.com/docs/guides/reasoning"          # limitations of reasoning models
OPENAI_LATEST = "https://platform.openai.com/docs/guides/latest-model"          # GPT-5.x parameter compatibility
OPENAI_CHAT_REF = "https://platform.openai.com/docs/api-reference/chat/create"  # max_tokens vs max_completion_tokens
ANTHROPIC_LAYER = "https://docs.anthropic.com/en/api/openai-sdk"                # the OpenAI SDK compatibility layer
ANTHROPIC_45 = "https://platform.claude.com/docs/en/about-claude/models/migrating-to-claude-4"  # temperature OR top_p
GEMINI_LAYER = "https://ai.google.dev/gemini-api/docs/openai"                   # reasoning_effort -> thinking budget
GEMINI_THINKING = "https://ai.google.dev/gemini-api/docs/thinking"              # 2.5 Pro cannot turn thinking off
DEEPSEEK_REASONER = "https://api-docs.deepseek.com/guides/reasoning_model"      # ignored / refused parameters
DEEPSEEK_JSON = "https://api-docs.deepseek.com/guides/json_mode"                # json_object only, "json" in prompt
VLLM_SERVER = "https://docs.vllm.ai/en/latest/serving/openai_compatible_server.html"  # extra sampling params

PROVIDERS = ("openai-reasoning", "anthropic-openai-layer", "gemini-openai-layer", "deepseek", "vllm")

# OpenAI's reasoning models, by model id: o1/o3/o4 (and their -mini, dated ids) and the GPT-5 family, not
# gpt-5-chat-latest (a non-reasoning chat model). OPENAI_REASONING, OPENAI_LATEST.
REASONING_MODEL = re.compile(r"^(o1|o3|o4)(-|$)|^gpt-5(?!-chat)")
SAMPLING_WITH_EFFORT_NONE = re.compile(r"^gpt-5\.[1-9]")  # GPT-5.1 and later: temperature/top_p with effort none
NO_SYSTEM_ROLE = re.compile(r"^o1-(mini|preview)")  # refuse system/developer messages and any response_format
CLAUDE_ONE_SAMPLER = re.compile(r"^claude-(?:(?:sonnet|haiku|opus)-4-[5-9]|opus-4-1)(?:\D|$)")  # ANTHROPIC_45
GEMINI_25_PRO = re.compile(r"^gemini-2\.5-pro")
GEMINI_3_PRO = re.compile(r"^gemini-3(\.\d+)?-pro")


@dataclass(frozen=True)
class Finding:
    """One parameter the provider does not take as sent: `says` follows "provider <name>", `fix` the `;`."""
    param: str
    says: str
    fix: str
    doc: str


def _differs(value: Any, default: float) -> bool:
    return value is not None and value != default


def _openai_effort(model_id: str) -> tuple[str, ...] | None:
    """The reasoning_effort values a reasoning model takes (None: the parameter is refused). OPENAI_LATEST;
    the sets match the API's own "Supported values are: ..." answers."""
    if NO_SYSTEM_ROLE.match(model_id):
        return None
    if model_id.startswith(("o1", "o3", "o4")):
        return ("low", "medium", "high")
    minor = re.match(r"^gpt-5\.(\d+)", model_id)
    if minor is None:  # gpt-5, gpt-5-mini, gpt-5-nano
        return ("minimal", "low", "medium", "high")
    return ("none", "low", "medium", "high") if int(minor.group(1)) == 1 else ("none", "low", "medium", "high",
                                                                              "xhigh")


def _openai_reasoning(model_id: str, params: dict) -> list[Finding]:
    if not REASONING_MODEL.match(model_id):
        return []  # gpt-4o, gpt-4.1, ...: the API takes their params as any OpenAI model's
    out = []
    if params.get("max_tokens") is not None:
        out.append(Finding("max_tokens", "refuses max_tokens for reasoning models", "use max_completion_tokens",
                           OPENAI_CHAT_REF))
    effort_none = SAMPLING_WITH_EFFORT_NONE.match(model_id) and params.get("reasoning_effort") == "none"
    for name in ("temperature", "top_p"):
        if _differs(params.get(name), 1) and not effort_none:
            out.append(Finding(name, f"refuses {name} other than 1 for reasoning models (GPT-5.1 and later take it "
                                     f"only with reasoning_effort: none)", f"leave {name} out", OPENAI_REASONING))
    for name in ("presence_penalty", "frequency_penalty"):
        if _differs(params.get(name), 0):
            out.append(Finding(name, f"refuses {name} for reasoning models", f"leave {name} out", OPENAI_REASONING))
    effort = params.get("reasoning_effort")
    if effort is not None:
        allowed = _openai_effort(model_id)
        if allowed is None:
            out.append(Finding("reasoning_effort", f"refuses reasoning_effort for {model_id}",
                               "leave reasoning_effort out", OPENAI_LATEST))
        elif effort not in allowed:
            out.append(Finding("reasoning_effort", f"takes reasoning_effort {', '.join(allowed)} for {model_id}, "
                                                   f"not {effort}", "use one of those", OPENAI_LATEST))
    return out


ANTHROPIC_IGNORED = ("seed", "presence_penalty", "frequency_penalty", "reasoning_effort")  # ANTHROPIC_LAYER


def _anthropic(model_id: str, params: dict) -> list[Finding]:
    out = []
    temperature = params.get("temperature")
    if temperature is not None and temperature > 1:
        out.append(Finding("temperature", f"clamps temperature to [0, 1] ({temperature} is sent as 1)",
                           "set temperature between 0 and 1", ANTHROPIC_LAYER))
    out += [Finding(name, f"ignores {name} (its OpenAI compatibility layer drops it)", f"leave {name} out",
                    ANTHROPIC_LAYER) for name in ANTHROPIC_IGNORED if params.get(name) is not None]
    if CLAUDE_ONE_SAMPLER.match(model_id) and temperature is not None and params.get("top_p") is not None:
        out.append(Finding("top_p", f"refuses temperature and top_p together for {model_id}",
                           "keep only one of them", ANTHROPIC_45))
    return out


def _gemini_effort(model_id: str) -> tuple[str, ...]:
    """reasoning_effort values: low/medium/high map to 1K/8K/24K thinking-token budgets, none turns thinking off
    (GEMINI_LAYER); 2.5 Pro cannot turn it off (GEMINI_THINKING); 3 Pro takes low and high."""
    if GEMINI_3_PRO.match(model_id):
        return ("low", "high")
    if GEMINI_25_PRO.match(model_id):
        return ("low", "medium", "high")
    return ("none", "low", "medium", "high")


def _gemini(model_id: str, params: dict) -> list[Finding]:
    effort = params.get("reasoning_effort")
    if effort is None or effort in _gemini_effort(model_id):
        return []
    return [Finding("reasoning_effort", f"takes reasoning_effort {', '.join(_gemini_effort(model_id))} for "
                                        f"{model_id}, not {effort}", "use one of those",
                    GEMINI_THINKING if effort == "none" else GEMINI_LAYER)]


def _deepseek(model_id: str, params: dict) -> list[Finding]:
    if model_id != "deepseek-reasoner":
        return []
    ignored = ("temperature", "top_p", "presence_penalty", "frequency_penalty")
    return [Finding(name, f"ignores {name} for deepseek-reasoner (accepted, no effect)", f"leave {name} out",
                    DEEPSEEK_REASONER) for name in ignored if params.get(name) is not None]


_PARAM_RULES = {"openai-reasoning": _openai_reasoning, "anthropic-openai-layer": _anthropic,
                "gemini-openai-layer": _gemini, "deepseek": _deepseek,
                "vllm": lambda model_id, params: []}  # VLLM_SERVER: the OpenAI params, seed, json_schema, top_k/min_p


def param_findings(provider: str | None, model_id: str, params: dict) -> list[Finding]:
    """The params (as one call sends them) the provider refuses, ignores or clamps for this model."""
    rules = _PARAM_RULES.get(provider) if provider else None
    return rules(model_id, params) if rules else []


def endpoint_findings(provider: str | None, ep) -> list[Finding]:
    """An endpoint's own settings the provider does not take (`param` is the endpoint field)."""
    out = []
    if provider == "anthropic-openai-layer":
        # batch: true / openai = the OpenAI Batch API at base_url, which the layer lacks (a native batch API of
        # the provider's own, where the config offers one, is another endpoint and not checked here)
        if getattr(ep, "batch_api", "openai" if ep.batch else None) == "openai":
            out.append(Finding("batch", "offers no OpenAI Batch API (/v1/files, /v1/batches)",
                               "set batch: false", ANTHROPIC_LAYER))
        if ep.structured_output != "none":
            out.append(Finding("structured_output", "ignores response_format",
                               "set structured_output: none (the schema then goes in the prompt)", ANTHROPIC_LAYER))
    if provider == "deepseek" and ep.structured_output == "json_schema":
        out.append(Finding("structured_output", "refuses response_format json_schema (JSON mode is json_object)",
                           "set structured_output: json_object", DEEPSEEK_JSON))
    return out


# --- the static check ------------------------------------------------------------------------------------------
EXTRA_SAMPLING = ("top_k", "min_p")


def sent_params(config) -> Iterator[tuple[str, dict, dict[str, str]]]:
    """(model, params as sent, config key of each param) for every model's own params and every family
    section's `params` / `model_params` (the convention in this module's docstring)."""
    raw = config.raw
    for name, model in config.models.items():
        yield name, dict(model.params), {p: f"models.{name}.params.{p}" for p in model.params}
    for family in raw.get("families") or []:
        section = raw.get(family)
        if not isinstance(section, dict):
            continue
        own = section.get("model_params") if isinstance(section.get("model_params"), dict) else {}
        shared = section.get("params") if isinstance(section.get("params"), dict) else None
        evaluated = section.get("evaluated") if isinstance(section.get("evaluated"), list) else []
        plan = [(m, own[m], f"{family}.model_params.{m}.{{}}") for m in own if m in config.models]
        if shared is not None:
            plan += [(m, shared, f"{family}.params.{{}} (sent to model '{m}')")
                     for m in evaluated if m in config.models and m not in own]
        for m, params, key in plan:
            model = config.models[m]
            extras = config.endpoints[model.endpoint].sampling_extras
            over = {p: v for p, v in (params or {}).items() if p not in EXTRA_SAMPLING or p in extras}
            keys = {p: f"models.{m}.params.{p}" for p in model.params}
            keys.update({p: key.format(p) for p in over})
            yield m, {**model.params, **over}, keys


def check(config) -> list[str]:
    """One line per parameter or endpoint setting a named provider refuses, ignores or clamps ([] = none)."""
    lines: list[str] = []
    for name, ep in config.endpoints.items():
        provider = getattr(ep, "provider", None)
        if provider is not None and provider not in PROVIDERS:
            lines.append(f"endpoints.{name}.provider: unknown provider '{provider}' (known: {', '.join(PROVIDERS)})")
            continue
        lines += [f"endpoints.{name}.{f.param}: provider {provider} {f.says}; {f.fix}"
                  for f in endpoint_findings(provider, ep)]
    for name, params, keys in sent_params(config):
        model = config.models[name]
        provider = getattr(config.endpoints[model.endpoint], "provider", None)
        for f in param_findings(provider, model.model_id, params):
            line = f"{keys.get(f.param, f'models.{name}.params.{f.param}')}: provider {provider} {f.says}; {f.fix}"
            if line not in lines:
                lines.append(line)
    return lines
