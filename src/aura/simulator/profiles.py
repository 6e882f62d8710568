"""Provider profiles for aura.simulator.server: how real OpenAI-compatible endpoints treat a chat request.

A profile takes the request body as sent and returns a :class:`Verdict`: either a refusal (HTTP status and the
error body in that provider's shape, with its own message text) or the body the provider goes on to use
(ignored params dropped, clamped params clamped), plus how it reports usage (reasoning tokens). The server
logs the request as sent, matches its rules on the body the provider uses, and adds a ``fake_profile`` block
to the answer (``name``, ``ignored``, ``clamped`` {param: [sent, used]}, ``notes``) so a test sees both sides.

Profiles (every rule cites the page it comes from; a message the page does not give verbatim is marked "ours"):

``ideal``                   today's behaviour: everything taken, nothing added (the default)
``openai-reasoning``        OpenAI's API; its reasoning models (o1*, o3*, o4*, gpt-5* but gpt-5-chat*) refuse
                            max_tokens, temperature/top_p other than 1 (GPT-5.1+ take them with
                            reasoning_effort "none"), penalties, logprobs and reasoning_effort values they lack;
                            o1-mini/o1-preview refuse system/developer messages and any response_format; usage
                            reports completion_tokens_details.reasoning_tokens, included in completion_tokens
``anthropic-openai-layer``  Anthropic's OpenAI SDK compatibility layer: response_format, seed, penalties,
                            reasoning_effort, logprobs, metadata, ... ignored; temperature clamped to [0, 1];
                            n must be 1; temperature + top_p together refused for Claude 4.5+; no /v1/files,
                            /v1/batches (404)
``gemini-openai-layer``     Gemini's OpenAI compatibility layer: reasoning_effort maps to a thinking budget
                            (none 0, low 1024, medium 8192, high 24576); values a model lacks refused (2.5 Pro
                            cannot turn thinking off; 3 Pro takes low/high); thinking models (gemini-2.5*,
                            gemini-3*) report thinking as reasoning tokens, billed as output
``deepseek``                JSON mode (json_object) refused without the word "json" in the prompt; json_schema
                            refused; deepseek-reasoner ignores temperature/top_p/penalties, refuses logprobs and
                            reports reasoning tokens
``vllm``                    takes the OpenAI params plus its extra sampling params (top_k, min_p, ... sent through
                            extra_body), response_format json_schema and seed
``vllm-no-parsers``         vllm started without --reasoning-parser and without --enable-auto-tool-choice /
                            --tool-call-parser: a reasoning model (DeepSeek-R1; Qwen3 unless chat_template_kwargs
                            enable_thinking is false) answers with its <think> block inside content; tool_choice
                            auto (the default with tools) is refused
``vllm-parsers``            vllm started with both: the reasoning comes separated (``reasoning_content``, and
                            ``reasoning`` as vLLM 0.11+ names it), content is the answer alone

Reasoning tokens (reasoning models only): a rule's ``reasoning_tokens`` field (which the server's own usage may
already carry), else :data:`REASONING_TOKENS`; at most what the provider's cap leaves (OpenAI:
max_completion_tokens less the answer; Gemini: the thinking budget reasoning_effort sets; deepseek-reasoner:
max_tokens less the answer), added to completion_tokens and total_tokens.
"""
from __future__ import annotations

import copy
import json
import re
from dataclasses import dataclass, field
from typing import Any

REASONING_TOKENS = 64  # reasoning tokens a reasoning model reports when the rule names none

# --- documentation ------------------------------------------------------------------------------------------
OPENAI_REASONING = "https://platform.openai.com/docs/guides/reasoning"
OPENAI_LATEST = "https://platform.openai.com/docs/guides/latest-model"
OPENAI_CHAT_REF = "https://platform.openai.com/docs/api-reference/chat/create"
OPENAI_STRUCTURED = "https://platform.openai.com/docs/guides/structured-outputs"
ANTHROPIC_LAYER = "https://docs.anthropic.com/en/api/openai-sdk"
ANTHROPIC_45 = "https://platform.claude.com/docs/en/about-claude/models/migrating-to-claude-4"
GEMINI_LAYER = "https://ai.google.dev/gemini-api/docs/openai"
GEMINI_THINKING = "https://ai.google.dev/gemini-api/docs/thinking"
DEEPSEEK_REASONER = "https://api-docs.deepseek.com/guides/reasoning_model"
DEEPSEEK_JSON = "https://api-docs.deepseek.com/guides/json_mode"
DEEPSEEK_CHAT_REF = "https://api-docs.deepseek.com/api/create-chat-completion"
VLLM_SERVER = "https://docs.vllm.ai/en/latest/serving/openai_compatible_server.html"
# reasoning models return the reasoning in an extra `reasoning_content` field when the server runs with
# --reasoning-parser (deepseek_r1, qwen3); renamed `reasoning` in 0.11 (`reasoning_content` kept for now)
VLLM_REASONING = "https://docs.vllm.ai/en/v0.11.2/features/reasoning_outputs/"
# tool_choice auto needs --enable-auto-tool-choice --tool-call-parser (llama3_json, hermes, ...)
VLLM_TOOLS = "https://docs.vllm.ai/en/latest/features/tool_calling/"


@dataclass
class Verdict:
    """What a provider does with one request: `refusal` (status, error body), or the `body` it uses."""
    profile: str
    body: dict
    refusal: tuple[int, Any] | None = None
    ignored: list[str] = field(default_factory=list)
    clamped: dict[str, list] = field(default_factory=dict)
    notes: dict[str, Any] = field(default_factory=dict)
    reasoning_cap: int | None = None  # None: the model reports no reasoning tokens
    cap_holds_answer: bool = False  # the cap bounds reasoning + answer (max_completion_tokens), not reasoning alone

    def drop(self, *names: str) -> None:
        for name in names:
            if name in self.body:
                self.body.pop(name)
                self.ignored.append(name)


def _num(value: Any) -> str:
    return json.dumps(value)


def _role_text(messages: Any) -> str:
    parts = []
    for m in messages if isinstance(messages, list) else []:
        content = m.get("content") if isinstance(m, dict) else None
        if isinstance(content, str):
            parts.append(content)
        elif isinstance(content, list):
            parts += [p.get("text", "") for p in content if isinstance(p, dict)]
    return "\n".join(parts)


# --- error bodies, each in its provider's shape -------------------------------------------------------------
def openai_error(message: str, param: str | None, code: str | None, status: int = 400) -> tuple[int, dict]:
    return status, {"error": {"message": message, "type": "invalid_request_error", "param": param, "code": code}}


def anthropic_error(message: str, status: int = 400, type_: str = "invalid_request_error") -> tuple[int, dict]:
    return status, {"type": "error", "error": {"type": type_, "message": message}}


def gemini_error(message: str, status: int = 400) -> tuple[int, dict]:
    return status, {"error": {"code": status, "message": message, "status": "INVALID_ARGUMENT"}}


def deepseek_error(message: str, status: int = 400) -> tuple[int, dict]:
    return status, {"error": {"message": message, "type": "invalid_request_error", "param": None,
                              "code": "invalid_request_error"}}


# --- profiles -----------------------------------------------------------------------------------------------
def _ideal(v: Verdict) -> None:
    return None


OPENAI_REASONING_MODEL = re.compile(r"^(o1|o3|o4)(-|$)|^gpt-5(?!-chat)")  # OPENAI_REASONING, OPENAI_LATEST
OPENAI_NO_SYSTEM = re.compile(r"^o1-(mini|preview)")                     # OPENAI_REASONING (limitations)


def _openai_efforts(model: str) -> list[str] | None:
    """What the API answers "Supported values are: ..." with (OPENAI_LATEST); None: reasoning_effort refused."""
    if OPENAI_NO_SYSTEM.match(model):
        return None
    if model.startswith(("o1", "o3", "o4")):
        return ["low", "medium", "high"]
    minor = re.match(r"^gpt-5\.(\d+)", model)
    if minor is None:
        return ["minimal", "low", "medium", "high"]
    return ["none", "low", "medium", "high"] + ([] if int(minor.group(1)) == 1 else ["xhigh"])


def _listing(values: list[str]) -> str:
    quoted = [f"'{x}'" for x in values]
    return ", ".join(quoted[:-1]) + f", and {quoted[-1]}" if len(quoted) > 1 else quoted[0]


def _openai_reasoning(v: Verdict) -> tuple[int, dict] | None:
    body, model = v.body, str(v.body.get("model") or "")
    if not OPENAI_REASONING_MODEL.match(model):
        return None  # gpt-4o, gpt-4.1, ...: taken as sent
    # OPENAI_CHAT_REF: max_tokens "is not compatible with o-series models"; the API's own message:
    if body.get("max_tokens") is not None:
        return openai_error("Unsupported parameter: 'max_tokens' is not supported with this model. "
                            "Use 'max_completion_tokens' instead.", "max_tokens", "unsupported_parameter")
    # OPENAI_REASONING (limitations) and OPENAI_LATEST: sampling only at its default, except GPT-5.1+ at effort none
    effort_none = re.match(r"^gpt-5\.[1-9]", model) and body.get("reasoning_effort") == "none"
    for name in ("temperature", "top_p"):
        if body.get(name) is not None and body[name] != 1 and not effort_none:
            return openai_error(f"Unsupported value: '{name}' does not support {_num(body[name])} with this model. "
                                f"Only the default (1) value is supported.", name, "unsupported_value")
    for name in ("presence_penalty", "frequency_penalty", "logprobs"):
        if body.get(name) not in (None, 0, False):
            return openai_error(f"Unsupported parameter: '{name}' is not supported with this model.", name,
                                "unsupported_parameter")
    effort = body.get("reasoning_effort")
    if effort is not None:
        allowed = _openai_efforts(model)
        if allowed is None:
            return openai_error("Unsupported parameter: 'reasoning_effort' is not supported with this model.",
                                "reasoning_effort", "unsupported_parameter")
        if effort not in allowed:
            return openai_error(f"Unsupported value: '{effort}' is not supported with the '{model}' model. "
                                f"Supported values are: {_listing(allowed)}.", "reasoning_effort", "unsupported_value")
    if OPENAI_NO_SYSTEM.match(model):
        rf = body.get("response_format")
        if isinstance(rf, dict) and rf.get("type") not in (None, "text"):
            return openai_error(f"Invalid parameter: 'response_format' of type '{rf.get('type')}' is not supported "
                                f"with this model. Learn more about supported models at the Structured Outputs "
                                f"guide: {OPENAI_STRUCTURED}", "response_format", None)
        for i, m in enumerate(body.get("messages") or []):
            if isinstance(m, dict) and m.get("role") in ("system", "developer"):
                return openai_error(f"Unsupported value: 'messages[{i}].role' does not support '{m['role']}' with "
                                    f"this model.", f"messages[{i}].role", "unsupported_value")
    # OPENAI_REASONING: reasoning tokens are billed as output and count against max_completion_tokens
    v.reasoning_cap, v.cap_holds_answer = body.get("max_completion_tokens") or 1 << 30, True
    return None


# ANTHROPIC_LAYER, "Request fields": these are "Ignored"
ANTHROPIC_IGNORED = ("logprobs", "metadata", "response_format", "prediction", "presence_penalty",
                     "frequency_penalty", "seed", "service_tier", "audio", "logit_bias", "store", "user",
                     "modalities", "top_logprobs", "reasoning_effort")
CLAUDE_ONE_SAMPLER = re.compile(r"^claude-(?:(?:sonnet|haiku|opus)-4-[5-9]|opus-4-1)(?:\D|$)")  # ANTHROPIC_45


def _anthropic(v: Verdict) -> tuple[int, dict] | None:
    body, model = v.body, str(v.body.get("model") or "")
    if body.get("n") not in (None, 1):  # ANTHROPIC_LAYER: n "Must be exactly 1" (message text: ours)
        return anthropic_error("n: only a value of 1 is supported")
    # ANTHROPIC_45: "Use only temperature OR top_p, not both"; the API's message for it:
    if CLAUDE_ONE_SAMPLER.match(model) and body.get("temperature") is not None and body.get("top_p") is not None:
        return anthropic_error("`temperature` and `top_p` cannot both be specified for this model. "
                               "Please use only one.")
    v.drop(*ANTHROPIC_IGNORED)
    for tool in body.get("tools") or []:  # ANTHROPIC_LAYER: tools[n].function.strict "Ignored"
        if isinstance(tool, dict) and isinstance(tool.get("function"), dict) and "strict" in tool["function"]:
            tool["function"].pop("strict")
            if "tools[].function.strict" not in v.ignored:
                v.ignored.append("tools[].function.strict")
    t = body.get("temperature")
    if isinstance(t, (int, float)) and t > 1:  # ANTHROPIC_LAYER: "Values greater than 1 are capped at 1"
        body["temperature"] = 1
        v.clamped["temperature"] = [t, 1]
    return None


GEMINI_BUDGET = {"none": 0, "low": 1024, "medium": 8192, "high": 24576}  # GEMINI_LAYER: "1K, 8K, and 24K"
GEMINI_THINKS = re.compile(r"^gemini-(2\.5|3)")


def _gemini(v: Verdict) -> tuple[int, dict] | None:
    body, model = v.body, str(v.body.get("model") or "")
    effort = body.get("reasoning_effort")
    if effort is not None:
        if re.match(r"^gemini-3(\.\d+)?-pro", model):
            allowed = ["high", "low"]  # Gemini 3 Pro takes low and high (message text: the forum's, as below)
        else:
            allowed = ["high", "low", "medium", "none"]
        if effort not in allowed:  # the layer's own answer (discuss.ai.google.dev, "reasoning_effort=minimal")
            return gemini_error(f"Invalid reasoning_effort: {effort}. Valid values are: {', '.join(allowed)}")
        if effort == "none" and model.startswith("gemini-2.5-pro"):  # GEMINI_THINKING: cannot turn thinking off
            return gemini_error("Budget 0 is invalid. This model only works in thinking mode.")
        v.notes["thinking_budget"] = GEMINI_BUDGET[effort]  # GEMINI_LAYER: reasoning_effort -> thinking budget
    if GEMINI_THINKS.match(model):  # GEMINI_THINKING: thinking tokens are billed as output
        v.reasoning_cap = GEMINI_BUDGET[effort] if effort is not None else 1 << 30
    return None


def _deepseek(v: Verdict) -> tuple[int, dict] | None:
    body, model = v.body, str(v.body.get("model") or "")
    rf = body.get("response_format")
    rf_type = rf.get("type") if isinstance(rf, dict) else None
    if rf_type not in (None, "text", "json_object"):  # DEEPSEEK_CHAT_REF: type is text or json_object
        return deepseek_error("This response_format type is unavailable now")
    if rf_type == "json_object" and "json" not in _role_text(body.get("messages")).lower():  # DEEPSEEK_JSON
        return deepseek_error("Prompt must contain the word 'json' in some form to use 'response_format' of type "
                              "'json_object'.")
    if model == "deepseek-reasoner":  # DEEPSEEK_REASONER: logprobs refused (message text: ours), the rest ignored
        for name in ("logprobs", "top_logprobs"):
            if body.get(name) not in (None, False):
                return deepseek_error(f"{name} is not supported by deepseek-reasoner")
        v.drop("temperature", "top_p", "presence_penalty", "frequency_penalty")
        v.reasoning_cap, v.cap_holds_answer = body.get("max_tokens") or 1 << 30, True  # max_tokens: CoT + answer
    return None


VLLM_EXTRA = ("top_k", "min_p", "repetition_penalty", "best_of", "use_beam_search", "length_penalty",
              "min_tokens", "guided_json", "guided_choice", "guided_regex", "structured_outputs")


def _vllm(v: Verdict) -> None:
    # VLLM_SERVER: "Extra Parameters" (sent through extra_body, merged into the JSON body) are taken as sampling
    # params; response_format json_schema and seed are OpenAI params it takes
    extras = {k: v.body[k] for k in VLLM_EXTRA if k in v.body}
    if extras:
        v.notes["extra_sampling"] = extras
    return None


def _thinks(body: dict) -> bool:
    """A reasoning model as vLLM serves it (VLLM_REASONING): DeepSeek-R1 always thinks; Qwen3 thinks unless
    chat_template_kwargs.enable_thinking is false."""
    model = str(body.get("model") or "").lower()
    thinking = (body.get("chat_template_kwargs") or {}).get("enable_thinking", True)
    return "deepseek-r1" in model or ("qwen3" in model and thinking is not False)


def _vllm_no_parsers(v: Verdict) -> tuple[int, dict] | None:
    # VLLM_TOOLS: tool_choice "auto" (also the default when tools are sent) needs the server started with
    # --enable-auto-tool-choice and --tool-call-parser; the message is vLLM's (as reported in its issues; "ours")
    _vllm(v)
    if v.body.get("tools") and v.body.get("tool_choice", "auto") == "auto":
        return openai_error('"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set',
                            None, None)
    v.notes["think_in_content"] = _thinks(v.body)  # VLLM_REASONING: no --reasoning-parser, the block stays in content
    return None


def _vllm_parsers(v: Verdict) -> None:
    _vllm(v)
    v.notes["reasoning_separated"] = _thinks(v.body)  # VLLM_REASONING: reasoning_content (0.11+: also reasoning)
    return None


PROFILES = {"ideal": _ideal, "openai-reasoning": _openai_reasoning, "anthropic-openai-layer": _anthropic,
            "gemini-openai-layer": _gemini, "deepseek": _deepseek, "vllm": _vllm,
            "vllm-no-parsers": _vllm_no_parsers, "vllm-parsers": _vllm_parsers}
# the provider (aura.llm.providers.PROVIDERS) each profile emulates: a serving variant (vLLM started with or
# without its parsers) is the same provider to the client; "ideal" emulates none
PROVIDER_OF = {"ideal": None, "vllm-no-parsers": "vllm", "vllm-parsers": "vllm",
               **{name: name for name in ("openai-reasoning", "anthropic-openai-layer", "gemini-openai-layer",
                                          "deepseek", "vllm")}}
THINKING = "The user asks for a verdict; I check the record step by step before I answer."
NO_BATCH_API = {"anthropic-openai-layer"}  # ANTHROPIC_LAYER: no /v1/files, /v1/batches through the layer


def check(name: str) -> str:
    if name not in PROFILES:
        raise ValueError(f"unknown profile {name!r} (known: {', '.join(PROFILES)})")
    return name


def apply(profile: str, body: dict) -> Verdict:
    """The provider's verdict on a request body (the body itself is never changed: the log keeps it as sent)."""
    if profile == "ideal":
        return Verdict(profile, body)
    v = Verdict(profile, copy.deepcopy(body))
    v.refusal = PROFILES[profile](v)
    return v


def batch_refusal(profile: str, path: str) -> tuple[int, Any] | None:
    """A 404 for /v1/files and /v1/batches from a provider without a Batch API."""
    if profile in NO_BATCH_API:
        return anthropic_error(f"Not Found: {path}", 404, "not_found_error")
    return None


def finish(v: Verdict, rule: dict, resp):
    """The answer as the provider reports it: reasoning tokens in usage, and the `fake_profile` block."""
    if v.profile == "ideal" or resp is None:
        return resp
    status, payload, extra, close = resp
    if status != 200 or not isinstance(payload, dict):
        return resp
    usage = payload.get("usage")
    if v.reasoning_cap is not None and isinstance(usage, dict):
        # the rule's reasoning tokens, already in usage when the server's `reasoning_tokens` field put them there
        # (then within the cap this provider sets), else REASONING_TOKENS
        details = usage.get("completion_tokens_details") or {}
        had = int(details.get("reasoning_tokens") or 0)
        visible = usage.get("completion_tokens", 0) - had
        cap = int(v.reasoning_cap) - (visible if v.cap_holds_answer else 0)
        n = max(0, min(had if "reasoning_tokens" in details else int(rule.get("reasoning_tokens", REASONING_TOKENS)),
                       cap))
        usage["completion_tokens"] = visible + n
        usage["total_tokens"] = usage.get("total_tokens", 0) - had + n
        usage["completion_tokens_details"] = {**details, "reasoning_tokens": n}
    message = ((payload.get("choices") or [{}])[0]).get("message") or {}
    if v.notes.get("think_in_content"):  # the reasoning in content, before the answer
        message["content"] = f"<think>\n{THINKING}\n</think>\n\n{message.get('content') or ''}"
    elif v.notes.get("reasoning_separated"):
        message["reasoning_content"] = message["reasoning"] = THINKING
    payload["fake_profile"] = {"name": v.profile, "ignored": v.ignored, "clamped": v.clamped, "notes": v.notes}
    return status, payload, extra, close
