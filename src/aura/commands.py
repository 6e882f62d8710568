"""Commands of `python -m aura` that are not pipeline stages: the core's (aura.core_commands, the one table of
their names) and those the registered families add through their manifests' `commands`.

A core command is a module defining `add_arguments(parser)` and `run(args) -> int`, or a `Command` (the three
below); a family's is a ``"module:object"`` naming a `Command` (or any object with `help`, `add_arguments` and
`run`). Building the CLI's parser imports each command's module for its arguments, so those modules stay light
and import what they need inside `run`; nothing else of a command is imported before it runs.
"""
from __future__ import annotations

import argparse
import importlib
import sys
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable

from .core_commands import CORE_COMMANDS
from .families import merged
from .families.base import load_target


@dataclass(frozen=True)
class Command:
    """A command: its help line, `add_arguments(parser)`, and `run(args)` returning the exit status."""
    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int | None]


@lru_cache(maxsize=None)
def family_commands() -> dict[str, str]:
    """name -> "module:object", every registered family's (the registry refuses one named like a core command)."""
    return merged("command", lambda family: family.commands)


def names() -> list[str]:
    return sorted({*CORE_COMMANDS, *family_commands()})


def command(name: str) -> Any:
    """What runs `python -m aura <name>`: a core command's module or object, or the object a family's names."""
    if name in CORE_COMMANDS:
        target = CORE_COMMANDS[name][1]
        return load_target(target) if ":" in target else importlib.import_module(target)
    return load_target(family_commands()[name])


def add_parsers(sub: argparse._SubParsersAction) -> None:
    for name in names():
        cmd = command(name)
        sp = sub.add_parser(name, help=CORE_COMMANDS[name][0] if name in CORE_COMMANDS else cmd.help)
        sp.set_defaults(command=name)
        cmd.add_arguments(sp)


def run(name: str, args: argparse.Namespace) -> int:
    return int(command(name).run(args) or 0)


# --- the core's commands that need no module of their own -----------------------------------------------------
def _configfile(p: argparse.ArgumentParser) -> None:
    p.add_argument("--configfile", required=True)


def _estimate_arguments(p: argparse.ArgumentParser) -> None:
    _configfile(p)
    p.add_argument("--config", nargs="+", action="extend", metavar="KEY=VALUE",
                   help="override config values as the workflow's --config does: same syntax, same merge "
                        "(e.g. 'aura={construct: {max_seeds: 3}}')")


def _estimate(args: argparse.Namespace) -> int:
    from .config import load_config, parse_overrides
    from .estimate import estimate, format_estimate

    config = load_config(args.configfile, parse_overrides(args.config))
    print(format_estimate(estimate(config), config))
    return 0


def _summary_arguments(p: argparse.ArgumentParser) -> None:
    _configfile(p)
    p.add_argument("--since", type=float, default=None, metavar="EPOCH_S",
                   help="say first what ran since this time (the Snakefile passes its start), then the folder's totals")


def _summary(args: argparse.Namespace) -> int:
    from .config import load_config
    from .pipeline.summary import end_of_run_lines

    print("\n".join(end_of_run_lines(load_config(args.configfile).raw, args.since)), file=sys.stderr)
    return 0


def _render_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("notebook", type=Path)
    p.add_argument("executed", type=Path, help="where the executed copy goes (a log)")
    p.add_argument("-p", dest="parameters", nargs=2, action="append", metavar=("NAME", "VALUE"),
                   help="notebook parameter, passed as a string")
    p.add_argument("--config-hash", default=None, help="the run's config hash (the Snakefile's), for the outputs' sidecars")
    p.add_argument("--outputs", nargs="*", default=[], metavar="FILE",
                   help="the figures and tables this render writes: each gets a provenance sidecar (<file>.prov.json)")
    p.add_argument("--draw", default=None, metavar="MODULE:FUNCTION",
                   help="a report drawn by this function (NOTEBOOK is then its module's file): the render builds the "
                        "notebook that calls it")


def _render(args: argparse.Namespace) -> int:
    from .pipeline.render import draw_notebook, parse_parameters, render, write_sidecars, yield_the_cpu

    yield_the_cpu()
    parameters = parse_parameters(args.parameters)
    render(draw_notebook(args.draw, parameters) if args.draw else args.notebook, args.executed, parameters)
    write_sidecars(args.notebook, parameters, args.outputs, args.config_hash)
    return 0


ESTIMATE = Command(CORE_COMMANDS["estimate"][0], _estimate_arguments, _estimate)
SUMMARY = Command(CORE_COMMANDS["summary"][0], _summary_arguments, _summary)
RENDER = Command(CORE_COMMANDS["render"][0], _render_arguments, _render)
