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
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import yaml

from .io import sha256_file

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


@lru_cache(maxsize=None)
def load_prompt(path: str | Path) -> Prompt:
    p = Path(path)
    return parse_prompt(p.read_text(encoding="utf-8"), str(p), sha256_file(p))
