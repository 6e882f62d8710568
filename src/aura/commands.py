"""Commands of `python -m aura` that are not pipeline stages (viewer, annotation app, cache tools ...).

Each entry names a module that defines `add_arguments(parser)` and `run(args) -> int`; the module is
imported only when its command runs, so `python -m aura <stage>` stays as fast as before.
Add a command by adding one line here.
"""
from __future__ import annotations

import argparse
import importlib

# name -> (help, module)
COMMANDS: dict[str, tuple[str, str]] = {
    "annotate": ("label a validation sample in a browser (127.0.0.1); writes paths.human_labels", "aura.web.annotate.command"),
    "cache": ("export the cache entries a run used into one checked archive, or import one", "aura.llm.cache_archive"),
    "view": ("browse a run's produced files in a browser (127.0.0.1), or --export DIR a static site", "aura.web.viewer.command"),
}


def add_parsers(sub: argparse._SubParsersAction) -> None:
    for name, (help_text, module) in COMMANDS.items():
        sp = sub.add_parser(name, help=help_text)
        importlib.import_module(module).add_arguments(sp)


def run(name: str, args: argparse.Namespace) -> int:
    return int(importlib.import_module(COMMANDS[name][1]).run(args) or 0)
