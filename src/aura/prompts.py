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

Which file of each prompt the pipeline uses is chosen in one place per family, its manifest's
``prompts`` (name -> folder, version): a changed prompt is a new file ``<name>.v<N+1>.md`` and moving
a stage to it is one edit there. ``versions()`` is the merge over every registered family (a name two
families define is an error). Stages load prompts with ``get_prompt(name)`` and the Snakemake rules
list ``prompt_file(name)`` as inputs, so a prompt edit reruns exactly the stages that render it.
"""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import yaml

from .config import repo_path
from .resources import resource_path

# The prompts of the LLM layer itself (JSON instruction and repair, rule repair), shared by every family
# (aura.resources: the checkout's prompts/, or a wheel's copy).
SHARED_DIR = resource_path("prompts", "llm")


def shared_prompt_dir() -> Path:
    return SHARED_DIR


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


@lru_cache(maxsize=None)
def versions() -> dict[str, Path]:
    """Every registered family's prompts: name -> the file in use."""
    from .families import merged

    return merged("prompt", lambda family: {name: family.prompt_path(name) for name in family.prompts})


def prompt_path(name: str) -> Path:
    """Absolute path of the file in use for prompt `name`."""
    known = versions()
    if name not in known:
        raise PromptError(f"unknown prompt '{name}' (known: {', '.join(sorted(known))})")
    return known[name]


def prompt_file(name: str) -> str:
    """Path of the file in use for prompt `name` as rules list it: relative to the repository root when
    it lies inside (the built-in families), else absolute."""
    return repo_path(prompt_path(name))


def get_prompt(name: str) -> Prompt:
    """The prompt `name` in the version its family's manifest selects."""
    return load_prompt(prompt_path(name))


def get_data_prompt(name: str) -> tuple[dict, dict]:
    """A data prompt (a YAML file of the manifest's `data_prompts`, e.g. per-category texts) in the version in
    use: (its parsed content, {file, sha256} for provenance). Read every time, parsed once per content."""
    path = prompt_path(name)
    data = path.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    return _yaml_cached(data.decode("utf-8"), digest), {"file": prompt_file(name), "sha256": digest}


@lru_cache(maxsize=None)
def _yaml_cached(text: str, sha256: str) -> dict:
    return yaml.safe_load(text) or {}
