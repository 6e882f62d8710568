"""Commands of `python -m aura` that are not pipeline stages: the core's (the run viewer, the cache
tools) and those the registered families add through their manifests' `commands`.

A core command is a module defining `add_arguments(parser)` and `run(args) -> int`, listed in `CORE`;
a family's is a ``"module:object"`` naming a `Command` (or any object with `help`, `add_arguments` and
`run`). Building the CLI's parser imports each command's module for its arguments, so those modules
stay light and import what they need inside `run`; nothing else of a command is imported before it runs.
"""
from __future__ import annotations

import argparse
import importlib
from dataclasses import dataclass
from typing import Any, Callable

from .families import merged
from .families.base import load_target

# name -> (help, module)
CORE: dict[str, tuple[str, str]] = {
    "cache": ("export the cache entries a run used into one checked archive, or import one", "aura.llm.cache_archive"),
    "view": ("browse a run's produced files in a browser (127.0.0.1), or --export DIR a static site", "aura.web.viewer.command"),
    "preflight": ("before a paid run: one short real call per model and capability the run uses, and its cost",
                  "aura.preflight"),
    "export-dataset": ("every family's benchmark as a Hugging Face dataset folder (Parquet, card, Croissant record)",
                       "aura.export_dataset.command"),
}


@dataclass(frozen=True)
class Command:
    """A family's command: its help line, `add_arguments(parser)`, and `run(args)` returning the exit status."""
    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int | None]


def _family_commands() -> dict[str, str]:
    found = merged("command", lambda family: family.commands)
    clash = sorted(set(found) & set(CORE))
    if clash:
        raise ValueError(f"family command(s) {clash} would replace the core's")
    return found


FAMILY_COMMANDS: dict[str, str] = _family_commands()  # name -> "module:object", every registered family's
COMMANDS: list[str] = sorted({*CORE, *FAMILY_COMMANDS})


def command(name: str) -> Any:
    """What runs `python -m aura <name>`: a core command's module, or the object a family's names."""
    if name in CORE:
        return importlib.import_module(CORE[name][1])
    return load_target(FAMILY_COMMANDS[name])


def add_parsers(sub: argparse._SubParsersAction) -> None:
    for name in COMMANDS:
        cmd = command(name)
        sp = sub.add_parser(name, help=CORE[name][0] if name in CORE else cmd.help)
        cmd.add_arguments(sp)


def run(name: str, args: argparse.Namespace) -> int:
    return int(command(name).run(args) or 0)
