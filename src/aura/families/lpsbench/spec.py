"""What one episode runs with, as one JSON file read by both sides: the agent loop and the tool server.

An episode is (case, evaluated model, sample index) under agent settings; the tool server needs the
case, the emulator model and the config (for the LLM layer and its cache). The file holds the raw
config, so a tool server started as a subprocess needs nothing else.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ...config import REPO_ROOT, Config, UserError, validate_config
from ...io import atomic_write_json, read_utf8
from .cases import LpsCase

PROMPTS = REPO_ROOT / "prompts" / "lpsbench"
AGENT_PROMPT = "agent_raw.v1.md"
EMULATOR_PROMPT = "emulator.v1.md"


class SpecError(UserError):
    """An episode spec file that cannot be used (one line naming the file)."""


class AgentSettings(BaseModel):
    """Caps and sampling of the agent loop (paper: 100 steps, temperature 1, top-p 0.9, top-k 50)."""

    model_config = ConfigDict(extra="forbid")
    max_steps: int = Field(default=100, ge=1)  # model calls per episode
    max_episode_tokens: int | None = Field(default=None, ge=1)  # token cap: prompt + completion, agent calls
    params: dict[str, Any] = Field(default_factory=dict)  # over the model's params (temperature, top_p, top_k)
    prompt: str = AGENT_PROMPT  # file under prompts/lpsbench/ with the system prompt and {{ instruction }}
    tool_choice: str | dict | None = None  # sent only when set: "auto", "required" or a named function


class EpisodeSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    config: dict[str, Any]  # the raw config (validated again by whoever reads the file)
    case: LpsCase
    agent_model: str
    emulator_model: str
    sample: int = Field(default=0, ge=0)  # LLMRequest.sample_index of every call of the episode
    settings: AgentSettings = Field(default_factory=AgentSettings)
    emulator_calls: str | None = None  # where the tool server writes its call records when it exits

    def check(self, config: Config) -> None:
        for role, name in (("agent_model", self.agent_model), ("emulator_model", self.emulator_model)):
            if name not in config.models:
                raise SpecError(f"{role} '{name}' is not a model of the config (known: {', '.join(config.models)})")

    def write(self, path: str | Path) -> Path:
        atomic_write_json(path, self.model_dump(mode="json"))
        return Path(path)


def load_spec(path: str | Path) -> tuple[EpisodeSpec, Config]:
    """The spec and its validated config, or SpecError/ConfigError with one line naming the file."""
    text = read_utf8(path, SpecError, "the episode spec")
    try:
        spec = EpisodeSpec.model_validate_json(text)
    except ValidationError as exc:
        err = exc.errors()[0]
        raise SpecError(f"{path}: {'/'.join(map(str, err['loc']))}: {err['msg']}") from None
    config = validate_config(spec.config, source=str(path))
    try:
        spec.check(config)
    except SpecError as exc:
        raise SpecError(f"{path}: {exc}") from None
    return spec, config
