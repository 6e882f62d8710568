"""What one episode runs with, as one JSON file read by both sides: the agent loop and the tool server.

An episode is (case, evaluated model, sample index) under agent settings; the tool server needs the
case, the emulator model and the config (for the LLM layer and its cache). The file holds the raw
config, so a tool server started as a subprocess needs nothing else.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from aura.config import Config, UserError, validate_config
from aura.io import atomic_write_json, read_utf8

from .cases import LpsCase

# Prompt names (the manifest's prompts, folder prompts/lpsbench/)
AGENT_PROMPT = "agent_raw"
EMULATOR_PROMPT = "emulator"
USER_PROMPT = "user_simulator"


class SpecError(UserError):
    """An episode spec file that cannot be used (one line naming the file)."""


class AgentSettings(BaseModel):
    """Caps and sampling of the agent loop (paper: 100 steps, temperature 1, top-p 0.9, top-k 50)."""

    model_config = ConfigDict(extra="forbid")
    max_steps: int = Field(default=100, ge=1)  # the step cap, counted in step_unit
    # model_calls: the agent's model calls; tool_calls: the tool calls it makes (upstream's runner counts these:
    # the call past the cap is not run, the episode stops with step_cap)
    step_unit: Literal["model_calls", "tool_calls"] = "model_calls"
    max_episode_tokens: int | None = Field(default=None, ge=1)  # token cap: prompt + completion, agent calls
    params: dict[str, Any] = Field(default_factory=dict)  # over the model's params (temperature, top_p, top_k)
    prompt: str = AGENT_PROMPT  # prompt name (VERSIONS) with the system prompt and {{ instruction }}
    tool_choice: str | dict | None = None  # sent only when set: "auto", "required" or a named function
    # native: the case's tools are offered, the model picks; single_act_tool: one `act` tool forced by a
    # named tool_choice, whose arguments name the tool (or finish) (agent.act_tool); act_json: the same act
    # arguments asked for as structured JSON output; endpoint `tool_calling`
    tool_calling: Literal["native", "single_act_tool", "act_json"] = "native"
    # Time limits on the tool server (the agent loop enforces them; None = none): one call, and all of an
    # episode's calls together. Past either, the call is abandoned, the episode stops with ``tool_failed``
    # and the reason, and run_case's exit kills the server process (lpsbench.tools; upstream back-end).
    tool_call_timeout_s: float | None = Field(default=None, gt=0)
    tool_time_limit_s: float | None = Field(default=None, gt=0)


class ToolBackend(BaseModel):
    """Who answers the tool calls (config ``lpsbench.tools``): the LM-emulated environment (``emulated``, the
    default) or upstream's own per-case mock-tool module from a user's LPS-Bench checkout (``upstream``), run
    in a subprocess MCP server (upstream_tool_server.py; launched by upstream_tools.py)."""

    model_config = ConfigDict(extra="forbid")
    backend: Literal["emulated", "upstream"] = "emulated"
    upstream_dir: str | None = None  # the checkout: <dir>/<MCP.file> or <dir>/tools/<MCP.file>
    python: str | None = None  # interpreter of the upstream servers (None: this one); needs mcp + the modules' imports
    network: Literal["auto", "unshare", "guard"] = "auto"  # auto: `unshare -rn` when it works, else the guard


class EpisodeSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    config: dict[str, Any]  # the raw config (validated again by whoever reads the file)
    case: LpsCase
    agent_model: str
    emulator_model: str | None = None  # required by the emulated back-end (check)
    sample: int = Field(default=0, ge=0)  # LLMRequest.sample_index of every call of the episode
    settings: AgentSettings = Field(default_factory=AgentSettings)
    emulator_calls: str | None = None  # where the tool server appends its call records as the calls complete
    user_model: str | None = None  # set (ask_user extension): an ask_user tool answered by this simulated user
    # What the emulator is shown as the tools' behaviour: an upstream case's module source (its tool specs are
    # then in case.body.tool_specs, read from that source with ast); None: the specs' own behaviour notes
    behaviour: str | None = None
    tools: ToolBackend = Field(default_factory=ToolBackend)
    texts: str | None = None  # the checkout whose own texts the agent gets (data.texts_root); None: our prompt files

    def check(self, config: Config) -> None:
        for role, name in (("agent_model", self.agent_model), ("emulator_model", self.emulator_model),
                           ("user_model", self.user_model)):
            if name is not None and name not in config.models:
                raise SpecError(f"{role} '{name}' is not a model of the config (known: {', '.join(config.models)})")
        if self.tools.backend == "emulated" and self.emulator_model is None:
            raise SpecError("emulator_model: the emulated tool back-end needs an emulator model")
        if self.tools.backend == "upstream" and not self.tools.upstream_dir:
            raise SpecError("the upstream tool back-end needs tools.upstream_dir (an LPS-Bench checkout)")
        if self.user_model is not None and "ask_user" in self.case.body.mcp.tools:
            raise SpecError(f"case {self.case.case_id} has its own tool named ask_user (the mitigation adds one)")

    def agent_prompt(self):
        """The agent's system prompt and instruction template: upstream's own text (``lpsbench.texts: upstream``, an
        upstream case: read from the checkout, with the Llama line when the model's id names it) or ours (the
        prompt file ``settings.prompt``, also for generated cases, which upstream's texts were not written for)."""
        from aura.prompts import get_prompt

        from .upstream_texts import agent_prompt

        if self.texts is None:
            return get_prompt(self.settings.prompt)
        model = (self.config.get("models") or {}).get(self.agent_model) or {}
        return agent_prompt(self.texts, self.settings.prompt, model.get("model_id") or self.agent_model)

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
