"""Prompt files: loading, strict templating, hashing.

A prompt file lives under ``prompts/`` and looks like::

    ---
    name: rollout_react
    version: 1
    variables: [scenario, tools]
    ---
    # system
    You are ...
    # user
    {{ scenario }}

Placeholders are ``{{ name }}``. Rendering is strict: every declared variable must be
supplied, no undeclared variable may be supplied, and every placeholder in the text must be
declared. Other braces (JSON examples) are left untouched.

Which file of each prompt the pipeline uses is chosen in one place, ``VERSIONS``: a changed
prompt is a new file ``<name>.v<N+1>.md`` and moving a stage to it is one edit here. Stages load
prompts with ``get_prompt(name)`` and the Snakemake rules list ``prompt_file(name)`` as inputs, so a
prompt edit reruns exactly the stages that render it.
"""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import yaml

from .config import REPO_ROOT

# name -> (folder under prompts/, version in use). Each prompt moves to a new version on its own. A family's
# prompts lie under prompts/<family>/ (AURA: prompts/aura/construct, prompts/aura/evaluate); prompts/llm/ is
# the shared layer (JSON and rule repair), loaded by path.
VERSIONS: dict[str, tuple[str, int]] = {
    "p1_step_tagging": ("aura/construct", 2),
    "p2_dimension_relevance": ("aura/construct", 3),
    "p3_harm_intensity_variation": ("aura/construct", 2),
    "p4_contextual_variation": ("aura/construct", 2),
    "p5_harm_intensity_review": ("aura/construct", 2),
    "p6_contextual_review": ("aura/construct", 2),
    "p7_pair_classification": ("aura/construct", 2),
    "p8_pair_generation": ("aura/construct", 2),
    "p9_pair_review": ("aura/construct", 2),
    "composed_variation": ("aura/construct", 1),  # composed mechanisms: two RS dimensions at once (edits)
    "composed_review": ("aura/construct", 1),  # composed mechanisms: review on both dimensions' criteria
    "dimensions": ("aura/construct", 1),  # RS1-RS6 / SD1-SD5 definitions (.yaml), rendered into P2, P4, P6
    "rollout_react": ("aura/evaluate", 2),
    "rollout_action_only": ("aura/evaluate", 2),
    "judge_detection": ("aura/evaluate", 2),
    "judge_action_type": ("aura/evaluate", 2),
    "judge_safety": ("aura/evaluate", 2),
    "emulator_open_ended": ("aura/evaluate", 1),  # open-ended rollouts: the environment answers a tool call
    "user_open_ended": ("aura/evaluate", 1),  # open-ended rollouts: the user answers the agent's message
    # PaSBench (aura.families.pasbench: respond, judge, probes)
    "proactive_text": ("pasbench", 1),
    "proactive_image": ("pasbench", 1),
    "risk_judge": ("pasbench", 1),
    "knowledge_probe": ("pasbench", 1),
    "reactive_text": ("pasbench", 1),
    "reactive_image": ("pasbench", 1),
    "verify_text": ("pasbench", 1),
    "verify_image": ("pasbench", 1),
    # PaSBench construction (aura.families.pasbench.construct)
    "construct_profile": ("pasbench", 1),
    "construct_log": ("pasbench", 2),
    "construct_review": ("pasbench", 1),
    "construct_image_prompts": ("pasbench", 2),
    # LPS-Bench (aura.families.lpsbench: agent, tool_server, episodes, evaluate)
    "agent_raw": ("lpsbench", 1),
    "agent_clarify": ("lpsbench", 1),  # mitigation for benign risks: ask_user before guessing
    "agent_safety": ("lpsbench", 1),  # mitigation for adversarial risks: safety-aware system prompt
    "emulator": ("lpsbench", 1),
    "user_simulator": ("lpsbench", 1),
    "evaluator": ("lpsbench", 1),
    # LPS-Bench case generation (aura.families.lpsbench.generate); the per-risk templates are a .yaml file
    "generate_templates": ("lpsbench", 1),
    "generate_designer": ("lpsbench", 1),
    "generate_tools": ("lpsbench", 1),
    "generate_criterion": ("lpsbench", 1),
}
YAML_PROMPTS = {"dimensions", "generate_templates"}  # files of prompt text read as data (.yaml), not chat prompts

PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
SECTION = re.compile(r"^# (system|user)\s*$", re.MULTILINE)


class PromptError(ValueError):
    pass


@dataclass(frozen=True)
class Prompt:
    name: str
    version: int
    path: str
    sha256: str
    variables: tuple[str, ...]
    system: str
    user: str

    @property
    def ref(self) -> str:
        return f"{self.name}.v{self.version}"

    def render(self, **values: str) -> list[dict]:
        """Return chat messages with every placeholder filled."""
        given, declared = set(values), set(self.variables)
        if given - declared:
            raise PromptError(f"{self.path}: unknown variables {sorted(given - declared)}")
        if declared - given:
            raise PromptError(f"{self.path}: missing variables {sorted(declared - given)}")

        def fill(text: str) -> str:
            return PLACEHOLDER.sub(lambda m: str(values[m.group(1)]), text)

        msgs = []
        if self.system.strip():
            msgs.append({"role": "system", "content": fill(self.system).strip()})
        msgs.append({"role": "user", "content": fill(self.user).strip()})
        return msgs


def parse_prompt(text: str, path: str, sha256: str) -> Prompt:
    if not text.startswith("---\n"):
        raise PromptError(f"{path}: must start with a '---' front-matter block")
    try:
        _, head, body = text.split("---\n", 2)
    except ValueError as exc:
        raise PromptError(f"{path}: unterminated front matter") from exc
    meta = yaml.safe_load(head) or {}
    for key in ("name", "version", "variables"):
        if key not in meta:
            raise PromptError(f"{path}: front matter lacks '{key}'")
    parts = SECTION.split(body)
    sections = {parts[i]: parts[i + 1] for i in range(1, len(parts) - 1, 2)}
    if "user" not in sections:
        raise PromptError(f"{path}: no '# user' section")
    variables = tuple(meta["variables"] or ())
    used = set(PLACEHOLDER.findall(sections.get("system", "") + sections["user"]))
    if used - set(variables):
        raise PromptError(f"{path}: placeholders not declared in variables: {sorted(used - set(variables))}")
    if set(variables) - used:
        raise PromptError(f"{path}: declared variables never used: {sorted(set(variables) - used)}")
    return Prompt(
        name=str(meta["name"]),
        version=int(meta["version"]),
        path=path,
        sha256=sha256,
        variables=variables,
        system=sections.get("system", ""),
        user=sections["user"],
    )


def load_prompt(path: str | Path) -> Prompt:
    """Read the file every time (an edited file gives a new hash, even within one process);
    parsing is cached by content."""
    p = Path(path)
    data = p.read_bytes()
    return _parse_cached(data.decode("utf-8"), str(p), hashlib.sha256(data).hexdigest())


@lru_cache(maxsize=None)
def _parse_cached(text: str, path: str, sha256: str) -> Prompt:
    return parse_prompt(text, path, sha256)


def prompt_file(name: str) -> str:
    """Path of the file in use for prompt `name`, relative to the repository root (as rules list it)."""
    if name not in VERSIONS:
        raise PromptError(f"unknown prompt '{name}' (known: {', '.join(sorted(VERSIONS))})")
    folder, version = VERSIONS[name]
    ext = "yaml" if name in YAML_PROMPTS else "md"
    return f"prompts/{folder}/{name}.v{version}.{ext}"


def prompt_path(name: str) -> Path:
    """Absolute path of the file in use for prompt `name`."""
    return REPO_ROOT / prompt_file(name)


def get_prompt(name: str) -> Prompt:
    """The prompt `name` in the version `VERSIONS` selects."""
    return load_prompt(prompt_path(name))
