"""What the families' Inspect tasks share: chat messages from rendered prompts, one structured judge call
parsed the way the LLM layer parses it, the prompt record every task puts in its metadata, a config model
as an Inspect model name with its generation settings (the paper configs' judges and sampling), and the
one-line error of a task's bad input.

Only the families' Inspect task modules import this (Inspect is never imported by a workflow job).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from inspect_ai._util.error import PrerequisiteError  # not re-exported; what Inspect's own input checks raise
from inspect_ai.model import (ChatMessage, ChatMessageAssistant, ChatMessageSystem, ChatMessageUser, ContentImage,
                              ContentText, GenerateConfig, Model, ResponseSchema)
from inspect_ai.util import JSONSchema

from rich.markup import escape
from rich.text import Text

from .config import REPO_ROOT
from .llm.structured import parse_structured
from .prompts import get_prompt, prompt_file

# A config endpoint's `provider` (aura.llm.providers.PROVIDERS) -> the Inspect provider of the same vendor's API.
INSPECT_PROVIDERS = {"openai-reasoning": "openai", "anthropic-openai-layer": "anthropic",
                     "gemini-openai-layer": "google"}
ROLES = {"system": ChatMessageSystem, "user": ChatMessageUser, "assistant": ChatMessageAssistant}


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
    status: str  # ok | unparsed | failed (as the LLM layer's results)
    value: Any  # the parsed JSON object (None unless ok)
    raw: str | None
    error: str | None


async def structured_call(model: Model, messages: list[dict], schema: dict, name: str,
                          config: GenerateConfig | None = None) -> Verdict:
    """One call asking for JSON under `schema` (sent as the response schema), parsed and validated by the LLM
    layer's parser. A call that raises is `failed`, an answer not valid under the schema `unparsed`."""
    rs = ResponseSchema(name=name, json_schema=JSONSchema.model_validate(schema), strict=True)
    cfg = (config or GenerateConfig()).merge(GenerateConfig(response_schema=rs))
    try:
        output = await model.generate(to_chat(messages), config=cfg)
    except Exception as exc:  # noqa: BLE001 - a failed call is a missing vote, as in the workflow
        return Verdict("failed", None, None, f"{type(exc).__name__}: {exc}")
    text = output.completion
    value, reason = parse_structured(text, schema)
    return Verdict("ok" if reason is None else "unparsed", value, text, reason)


class TaskInputError(PrerequisiteError):
    """A task's bad input (a missing file, a bad row, an empty subset), one line. Inspect prints a
    PrerequisiteError's message without a traceback (through rich: the text is escaped, so a list in
    brackets stays as written)."""

    def __init__(self, message: str) -> None:
        text = " ".join(str(message).split())
        super().__init__(escape(text))
        self.args = (text,)


def generate_config(params: dict[str, Any], where: str) -> GenerateConfig:
    """A config's model params (temperature, max_tokens, seed, ...) as Inspect's GenerateConfig; a key it
    has no field for is an error naming `where` the params come from."""
    unknown = sorted(set(params) - set(GenerateConfig.model_fields))
    if unknown:
        raise ValueError(f"{where}: {unknown[0]!r} has no Inspect GenerateConfig field")
    return GenerateConfig(**params)


@dataclass(frozen=True)
class ConfigModel:
    """A model of an aura config as Inspect calls it: ``<provider>/<model_id>`` and its params."""
    name: str
    inspect_name: str
    config: GenerateConfig


def paper_config(name: str):
    """A config of the repository's `config/` folder (e.g. ``paper.yaml``), loaded and validated."""
    from .config import load_config

    return load_config(Path(REPO_ROOT) / "config" / name)


def config_model(config, name: str, extra: dict[str, Any] | None = None) -> ConfigModel:
    """Model `name` of `config` as an Inspect model: its endpoint's provider mapped to Inspect's
    (INSPECT_PROVIDERS), its model id, its params (then `extra`, as a request's params override a
    model's in the LLM layer) as a GenerateConfig."""
    model = config.models[name]
    endpoint = config.endpoints[model.endpoint]
    provider = INSPECT_PROVIDERS.get(getattr(endpoint, "provider", None) or "")
    if provider is None:
        raise ValueError(f"model {name!r}: endpoint {model.endpoint!r} (provider {endpoint.provider!r}) has no "
                         f"Inspect provider here (known: {sorted(INSPECT_PROVIDERS)})")
    params = {**model.params, **(extra or {})}
    return ConfigModel(name, f"{provider}/{model.model_id}", generate_config(params, f"models.{name}.params"))


def agreed_params(config, names: list[str]) -> dict[str, Any]:
    """The params on which every model in `names` that sets the key agrees (a key set to two values, or
    to none, is left out): the defaults a set of configured models shares."""
    seen: dict[str, set] = {}
    for name in names:
        for key, value in config.models[name].params.items():
            seen.setdefault(key, set()).add(value)
    return {key: next(iter(values)) for key, values in sorted(seen.items()) if len(values) == 1}


def resolve_models(roles: dict[str, ConfigModel]) -> dict[str, Model]:
    """Each model role's Inspect model, resolved now: the bound model (`--model-role`), else the default
    with its paper params. Resolving builds the provider's client, so a missing provider package or API
    key fails here, before any call; the models are memoized, so later `get_model(role=...)` calls return
    these. A role bound by the user keeps its own settings (the paper's params belong to the paper's model)."""
    from inspect_ai.model import get_model, model_roles

    bound = model_roles()
    out = {}
    for role, default in roles.items():
        try:
            out[role] = (get_model(role=role) if role in bound else
                         get_model(role=role, default=default.inspect_name, config=default.config))
        except Exception as exc:  # noqa: BLE001 - a provider's own check (package, key): one line naming the role
            what = "the model bound to it" if role in bound else (
                f"{default.inspect_name}, the paper's {default.name}; bind another with --model-role {role}=...")
            text = exc.message if isinstance(exc, PrerequisiteError) else f"{type(exc).__name__}: {exc}"
            plain = Text.from_markup(text).plain if isinstance(text, str) else str(text)
            raise TaskInputError(f"model role {role} ({what}): {plain.removeprefix('ERROR: ')}") from None
    return out
