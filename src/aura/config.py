"""Load and validate the workflow config (config/schema.yaml) into typed objects."""
from __future__ import annotations

import copy
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import jsonschema
import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

from .errors import ConfigError, UserError  # noqa: F401 - re-exported: callers import them from here
from .io import atomic_write_text, canonical_json, sha256_text
from .provider_rules import check as provider_problems
from .resources import ROOT as REPO_ROOT  # the checkout, or a wheel's copy of prompts/ and config/

DEFAULT_SCHEMA = REPO_ROOT / "config" / "schema.yaml"


def repo_path(path: str | Path) -> str:
    """A file as rules, outputs and sidecars name it: relative to the repository when it lies inside (the
    built-in families' files), else as given (a file of a family installed from elsewhere)."""
    resolved = Path(path).resolve()
    return str(resolved.relative_to(REPO_ROOT)) if resolved.is_relative_to(REPO_ROOT) else str(path)


class LocalServerConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    package: str
    model_file: str
    n_ctx: int
    n_threads: int
    startup_timeout_s: float
    shared: bool = True  # one server per endpoint settings, shared by jobs (see llm.local_server)
    prompt_cache_mb: int = 0  # llama.cpp RAM cache of earlier prompts' KV states (0 = off)
    model_sha256: str | None = None  # the GGUF file's sha256, checked before a server loads it (None: not checked)
    # what serves it (llm.llama_engine)
    engine: Literal["auto", "xllamacpp", "llama-server", "llama-cpp-python"] = "auto"
    slots: int = 1  # requests llama-server answers at once (continuous batching); the Python engine answers one


class Endpoint(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    kind: Literal["openai", "local"]
    base_url: str | None = None
    api_key_env: str | None
    structured_output: Literal["json_schema", "json_object_schema", "gbnf_schema", "json_object", "none"]
    max_concurrency: int
    max_parallel_jobs: int
    timeout_s: float
    max_tries: int
    backoff_base_s: float
    backoff_max_s: float
    repair_tries: int
    local: LocalServerConfig
    grammar: Literal["gbnf", "none"] = "none"  # gbnf: accepts extra_body={"grammar": ...} (llama.cpp)
    extra_sampling: list[Literal["top_k", "min_p"]] | None = None  # non-OpenAI sampling params it takes
    tool_calling: Literal["native", "single_act_tool", "act_json"] | None = None  # how a tool-using agent calls tools
    provider: str | None = None  # whose OpenAI-compatible API: its parameter rules (aura.provider_rules); null = none
    # the batch API it takes (llm.batch routes roles through it): true / openai = the OpenAI Batch API (/v1/files +
    # /v1/batches, at base_url); anthropic = Anthropic's Message Batches API (native, at batch_base_url)
    batch: Literal["openai", "anthropic"] | bool = False
    batch_base_url: str | None = None  # batch: anthropic: the native API's root (null = https://api.anthropic.com)

    @property
    def batch_api(self) -> str | None:
        """openai, anthropic, or None (no batch API): what `batch` says, true read as openai."""
        return "openai" if self.batch is True else (self.batch or None)

    @property
    def tool_mode(self) -> str:
        """native = the model picks among the offered tools; single_act_tool = one `act` tool named in
        tool_choice (the server constrains the answer to its schema); act_json = the act tool's arguments asked
        for as structured JSON output, turned into the act call in code (for servers that ignore a named
        tool_choice when the chat template has no tools: llama-server with SmolLM2). null: act_json for kind
        local, native otherwise."""
        return self.tool_calling or ("act_json" if self.kind == "local" else "native")

    @property
    def sampling_extras(self) -> tuple[str, ...]:
        """Sampling params outside the OpenAI API this endpoint takes (sent via extra_body)."""
        if self.extra_sampling is not None:
            return tuple(self.extra_sampling)
        return ("top_k", "min_p") if self.kind == "local" else ()

    @property
    def cache_identity(self) -> str:
        """What enters the cache key for this endpoint.

        A local server gets a fresh port every job, so its identity is the model file, not the URL.
        """
        if self.kind == "local":
            return f"local://{self.local.package}/{self.local.model_file}"
        return self.base_url or ""


class Price(BaseModel):
    input_per_mtok: float = 0.0
    output_per_mtok: float = 0.0
    per_image: float = 0.0  # USD per generated image (images endpoint)
    cached_input: float | None = None  # USD per 1M prompt tokens the provider served from its prefix cache
    batch_discount: float = 0.5  # share of the price taken off for calls through the Batch API

    def cost(self, tokens_in: int, tokens_out: int, tokens_cached: int | None = 0, batch: bool = False) -> float:
        """USD of one call; `tokens_cached` of `tokens_in` at the cached-input price (input price when
        none is set), everything times (1 - batch_discount) for a Batch API call."""
        cached = min(tokens_cached or 0, tokens_in) if self.cached_input is not None else 0
        usd = ((tokens_in - cached) * self.input_per_mtok + cached * (self.cached_input or 0.0)
               + tokens_out * self.output_per_mtok) / 1e6
        return usd * (1.0 - self.batch_discount) if batch else usd


class Model(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    endpoint: str
    model_id: str
    label: str | None = None
    vendor: str | None = None
    unavailable: str | None = None  # why the entry cannot be run today (schema: models.*.unavailable)
    group: Literal["frontier", "open-weight", "safety-tuned", "local"]
    vision: bool
    params: dict[str, Any]
    price: Price
    # how the model's server must be started (vLLM flags): reasoning_parser, tool_call_parser; `aura preflight`
    # checks that answers arrive as they would (reasoning separated, structured tool_calls)
    serving: dict[str, Any] = {}

    @property
    def display(self) -> str:
        return self.label or self.name


class Config(BaseModel):
    """The validated config. ``raw`` keeps the defaults-filled dict (what Snakemake sees)."""

    raw: dict[str, Any]
    endpoints: dict[str, Endpoint]
    models: dict[str, Model]

    @property
    def paths(self) -> dict[str, str]:
        return self.raw["paths"]

    @property
    def hash(self) -> str:
        return config_hash(self.raw)

    def model(self, name: str) -> Model:
        return self.models[name]

    def endpoint_of(self, model_name: str) -> Endpoint:
        return self.endpoints[self.models[model_name].endpoint]

    def section(self, family: str) -> dict[str, Any]:
        """A family's own settings (its config section, defaults filled): `family_section(self.raw, family)`."""
        return family_section(self.raw, family)


def family_section(raw: Mapping, family: str) -> dict[str, Any]:
    """A family's own settings: its section of a config (`<family>: {...}`), with the defaults of the family's
    schema filled once the config is validated (`validate_config`: Config.raw, what every stage, `aura estimate`
    and the Snakefile read); {} for a raw config without it. The one accessor: `Config.section` and the
    families' settings helpers read a section through it."""
    return raw.get(family) or {}


def config_hash(raw: dict) -> str:
    return sha256_text(canonical_json(raw))


def _extend_with_defaults(validator_class):
    """jsonschema validator that fills `default` values, as snakemake.utils.validate does."""
    validate_props = validator_class.VALIDATORS["properties"]

    def set_defaults(validator, properties, instance, schema):
        if isinstance(instance, dict):
            for prop, sub in properties.items():
                if isinstance(sub, dict) and "default" in sub and prop not in instance:
                    instance[prop] = copy.deepcopy(sub["default"])
        yield from validate_props(validator, properties, instance, schema)

    return jsonschema.validators.extend(validator_class, {"properties": set_defaults})


def config_schema(schema_path: Path = DEFAULT_SCHEMA) -> dict:
    """The config schema: the shared keys (config/schema.yaml) plus every registered family's section
    (`<name>: <the manifest's schema>`) and the folders a family adds to `paths`."""
    from .families import all_families

    schema = yaml.safe_load(Path(schema_path).read_text())
    properties = schema.setdefault("properties", {})
    paths = properties.setdefault("paths", {"type": "object"}).setdefault("properties", {})
    for family in all_families():
        properties[family.name] = copy.deepcopy(family.schema)
        clash = sorted(set(family.paths_schema) & set(paths))
        if clash:
            raise ConfigError(f"family '{family.name}' adds paths.{clash[0]}, which is already defined")
        paths.update(copy.deepcopy(family.paths_schema))
    return schema


def _get(raw: dict, dotted: str):
    node = raw
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def _moved_keys(raw: dict, source: str) -> None:
    """A key that moved (`roles` -> `aura.roles`, `estimate.seeds` -> `aura.estimate.seeds`): one line
    saying where it went."""
    from .families import all_families

    moved = {old: new for family in all_families() for old, new in family.moved_keys.items()
             if _get(raw, old) is not None}
    if moved:
        where = ", ".join(f"{old} -> {new}" for old, new in moved.items())
        raise ConfigError(f"{source}: config keys moved under their family's section (every family's own settings "
                          f"sit under its name): {where}")


def _registered(raw: dict, source: str) -> None:
    """`families` names registered families only (default: every one); checked before the schema, whose
    sections are the registered families'."""
    from .families import check_names, names

    if not names():
        raise ConfigError(f"{source}: no benchmark family is registered (entry-point group aura.families): the "
                          "package metadata is missing or stale; run `bash scripts/bootstrap.sh` (pip install -e .)")
    check_names()
    chosen = raw.setdefault("families", names())
    unknown = [n for n in chosen if n not in names()] if isinstance(chosen, list) else []
    if unknown:
        raise ConfigError(f"{source}: families: {', '.join(map(str, unknown))} not registered (registered: "
                          f"{', '.join(names())}; a family is a package with an entry point in the group aura.families)")


def _check_families(raw: dict, source: str) -> None:
    """Each enabled family's own checks of what the schema cannot see, and its settings typed as model names
    (`"format": "model"` in its schema), one line each."""
    from .families import load
    from .families.derive import model_problems

    problems = [line for name in raw["families"] for line in model_problems(load(name), raw)]
    problems += [line for name in raw["families"] if load(name).check for line in load(name).check(raw)]
    if problems:
        raise ConfigError(f"{source}: " + "; ".join(problems))


def validate_config(raw: dict, schema_path: Path = DEFAULT_SCHEMA, source: str = "<config>") -> Config:
    raw = copy.deepcopy(raw)
    _registered(raw, source)
    _moved_keys(raw, source)
    validator = _extend_with_defaults(jsonschema.Draft202012Validator)(config_schema(schema_path))
    errors = sorted(validator.iter_errors(raw), key=lambda e: [str(x) for x in e.absolute_path])
    if errors:
        lines = [f"{'/'.join(map(str, e.absolute_path)) or '<root>'}: {e.message}" for e in errors[:5]]
        more = f" (and {len(errors) - 5} more)" if len(errors) > 5 else ""
        raise ConfigError(f"{source}: invalid config: " + "; ".join(lines) + more)
    config = _typed(raw, source)
    _check_families(raw, source)
    if problems := provider_problems(config):  # each endpoint's provider rules, before any call
        raise ConfigError(f"{source}: " + "; ".join(problems))
    return config


def _pydantic(source: str, prefix: str, cls, **fields):
    """Build a typed section; a pydantic error reads like a schema error (file + field path)."""
    try:
        return cls(**fields)
    except ValidationError as exc:
        lines = [f"{'/'.join([prefix, *map(str, e['loc'])])}: {e['msg']}" for e in exc.errors(include_url=False)]
        raise ConfigError(f"{source}: invalid config: " + "; ".join(lines)) from None


def _typed(raw: dict, source: str) -> Config:
    endpoints = {name: _pydantic(source, f"endpoints/{name}", Endpoint, name=name, **ep)
                 for name, ep in raw["endpoints"].items()}
    for name, ep in endpoints.items():
        if ep.kind == "openai" and not ep.base_url:
            raise ConfigError(f"{source}: endpoint '{name}' of kind openai needs base_url")
    models = {name: _pydantic(source, f"models/{name}", Model, name=name, **m) for name, m in raw["models"].items()}
    for name, m in models.items():
        if m.endpoint not in endpoints:
            raise ConfigError(f"{source}: model '{name}' names unknown endpoint '{m.endpoint}'")
        refused = [p for p in ("top_k", "min_p") if p in m.params and p not in endpoints[m.endpoint].sampling_extras]
        if refused:
            raise ConfigError(f"{source}: model '{name}': params {', '.join(refused)} not taken by endpoint "
                              f"'{m.endpoint}' (list them in its extra_sampling if the server accepts them)")
    return Config(raw=raw, endpoints=endpoints, models=models)


def read_raw(path: str | Path, _seen: tuple = ()) -> dict:
    """The YAML of a config file, with `extends: other.yaml` (relative to this file) merged under it.

    The Snakefile uses this too, so Snakemake and the package always see the same config.
    """
    path = Path(path)
    if path.resolve() in _seen:
        raise ConfigError(f"{path}: circular 'extends'")
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read config: {exc}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        what = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(f"{path}: not valid YAML{where}: {what}") from None
    raw = {} if raw is None else raw
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: the top level must be a mapping of config keys, got a {type(raw).__name__}")
    base = raw.pop("extends", None)
    if base:
        raw = _deep_merge(read_raw(path.parent / base, (*_seen, path.resolve())), raw)
    return raw


def load_config(path: str | Path, overrides: dict | None = None) -> Config:
    path = Path(path)
    raw = read_raw(path)
    if overrides:
        raw = _deep_merge(raw, overrides)
    schema = path.parent / "schema.yaml"
    return validate_config(raw, schema if schema.exists() else DEFAULT_SCHEMA, source=str(path))


def command_line_overrides(values) -> dict:
    """Snakemake's `--config key=value` pairs as plain data.

    Snakemake types a top-level value (int, float, bool, else text) but reads a nested one,
    `--config 'aura={construct: {max_seeds: 3}}'`, as YAML with every scalar a string: those are typed
    here the way a config file would type them ('3' -> 3, 'null' -> None, 'true' -> True).
    """
    def typed(value, nested: bool):
        if isinstance(value, Mapping):
            return {str(k): typed(v, True) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [typed(v, True) for v in value]
        if nested and isinstance(value, str):
            try:
                return yaml.safe_load(value)
            except yaml.YAMLError:
                return value
        return value

    return {str(k): typed(v, False) for k, v in dict(values or {}).items()}


def parse_overrides(entries: list[str] | None) -> dict:
    """`--config KEY=VALUE ...` of a command (`aura estimate`) read as the workflow reads its own: Snakemake's
    parser (the same syntax), then typed by `command_line_overrides`; `load_config` merges them as the
    workflow does. A malformed entry is one line."""
    if not entries:
        return {}
    from snakemake.cli import parse_config  # what reads the workflow's --config; imported only when one is given

    try:
        return command_line_overrides(parse_config(entries))
    except ValueError as exc:
        raise ConfigError(f"--config {' '.join(entries)}: {exc}") from None


def write_merged(raw: dict, folder: str | Path) -> Path:
    """The config file plus command-line overrides, written where every job reads it.

    The name carries the hash of the content, so two different override sets never share a file
    and a rerun with the same ones finds the same file.
    """
    path = Path(folder) / f"config.{config_hash(raw)[:16]}.yaml"
    if not path.exists():
        atomic_write_text(path, "# written by the Snakefile: config file + --config overrides\n"
                          + yaml.safe_dump(raw, sort_keys=True, allow_unicode=True))
    return path


def workflow_config(configfile: str | Path, overrides: dict | None, folder: str | Path) -> tuple[dict, str]:
    """What the Snakefile runs with: (the validated config with its defaults filled, the file every job reads).

    Without `--config` overrides the jobs read `configfile` itself. With them, the merged config is
    checked like any config (an unknown key or a bad value stops Snakemake before any job) and
    written to `folder` under its hash; the jobs read that file, so an override is never ignored.
    """
    raw = read_raw(configfile)
    over = command_line_overrides(overrides)
    if not over:
        return validate_config(raw, source=str(configfile)).raw, str(configfile)
    raw = _deep_merge(raw, over)
    checked = validate_config(raw, source=f"{configfile} with --config {', '.join(sorted(over))}")
    return checked.raw, str(write_merged(raw, folder))


def _deep_merge(base: dict, over: dict) -> dict:
    out = dict(base)
    for k, v in over.items():
        out[k] = _deep_merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out
