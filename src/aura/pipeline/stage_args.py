"""Checks of a stage's command-line arguments (`python -m aura <stage> ...`): a mistake stops the
job with one line instead of being ignored or failing later with a traceback."""
from __future__ import annotations

import re
from pathlib import Path

from ..config import Config, UserError


class ArgumentError(UserError):
    pass


def parse_pairs(values: list[str] | None, flag: str) -> dict[str, str]:
    """`NAME=VALUE` arguments as a dict; a malformed or repeated name is an error."""
    out: dict[str, str] = {}
    for v in values or []:
        name, sep, value = v.partition("=")
        if not sep or not name or not value:
            raise ArgumentError(f"{flag} expects NAME=VALUE, got {v!r}")
        if name in out:
            raise ArgumentError(f"{flag} {name} is given twice ({out[name]!r} and {value!r})")
        out[name] = value
    return out


class NamedPaths(dict):
    """`--in` / `--out` paths by name; a stage asking for a name the command line did not give gets one
    clear line (exit 2), not a KeyError traceback."""

    def __init__(self, paths: dict[str, Path], flag: str):
        super().__init__(paths)
        self.flag = flag

    def __missing__(self, name: str) -> Path:
        raise ArgumentError(f"this stage needs {self.flag} {name}=PATH (given: {', '.join(self) or 'none'})")


def parse_paths(values: list[str] | None, flag: str) -> NamedPaths:
    return NamedPaths({k: Path(v) for k, v in parse_pairs(values, flag).items()}, flag)


def parse_shard(text: str) -> tuple[int, int]:
    """`i/n` with 0 <= i < n."""
    m = re.fullmatch(r"(\d+)/(\d+)", text.strip())
    if not m:
        raise ArgumentError(f"--shard expects i/n (e.g. 0/4), got {text!r}")
    i, n = int(m.group(1)), int(m.group(2))
    if n < 1 or i >= n:
        raise ArgumentError(f"--shard {text}: the shard index must satisfy 0 <= i < n")
    return i, n


def parse_options(stage: str, values: list[str] | None) -> dict[str, str]:
    """`--option KEY=VALUE` pairs, each key one the stage declares (its manifest's Stage.options) and each
    value passing that key's check."""
    from .registry import STAGES

    options = parse_pairs(values, "--option")
    known = STAGES[stage].options if stage in STAGES else {}
    for key, value in options.items():
        if key not in known:
            hint = f"known: {sorted(known)}" if known else "it takes no --option"
            raise ArgumentError(f"{stage}: unknown --option {key}={value} ({hint})")
        problem = known[key](value)
        if problem:
            raise ArgumentError(f"{stage}: --option {key}={value}: {problem}")
    return options


def check_models(config: Config, **named: str | None) -> None:
    """`--model` / `--judge` must name a model of the config."""
    for flag, name in named.items():
        if name is not None and name not in config.models:
            raise ArgumentError(f"--{flag} {name}: not a model of the config (models: {sorted(config.models)})")
