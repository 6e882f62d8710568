"""What a benchmark family is: a name, its stages, where its files live, its reports, its targets.

Every family is found the same way: its manifest is ``aura.families.<name>`` exposing ``FAMILY``; its
rules are ``rules/<name>/*.smk``, its prompts ``prompts/<name>/``, its notebooks ``notebooks/<name>/``
and its report captions ``report/<name>/<report>.rst`` (paths relative to the repository root, so a
copy of the workflow finds its own). A manifest imports nothing heavy: a stage names its entry point
as a string and the module is imported only when the stage runs.
"""
from __future__ import annotations

from dataclasses import dataclass
from importlib import import_module
from pathlib import PurePosixPath
from typing import Any, Callable


@dataclass(frozen=True)
class Stage:
    """A stage's help line and its entry point, ``"package.module:function"`` taking a StageContext;
    the module (and its heavy imports: scipy, statsmodels, pandas) is imported only when the stage runs,
    so every job starts fast."""
    help: str
    target: str

    def __post_init__(self) -> None:
        module, sep, function = self.target.partition(":")
        if not (sep and module and function.isidentifier()):
            raise ValueError(f"stage target '{self.target}' is not 'package.module:function'")

    def entry(self) -> Callable[[Any], None]:
        module, function = self.target.split(":")
        return getattr(import_module(module), function)

    def run(self, ctx) -> None:
        self.entry()(ctx)


@dataclass(frozen=True)
class Family:
    """One benchmark family's manifest.

    stages:  CLI name -> Stage (`python -m aura <name>`); names are unique across families.
    layout:  raw config -> {layout key: path pattern}; keys are unique across families, and the function
             reads only `paths` (it is merged for every family, enabled or not).
    reports: report name -> spec (`notebook`, `inputs` = layout keys, optional `figure`, `tables`, `needs`),
             rendered by the Snakefile's render rule; the notebook lies under `notebooks_dir`.
    targets: raw config -> the files `snakemake all` builds for this family.
    """
    name: str
    title: str
    stages: dict[str, Stage]
    layout: Callable[[dict], dict[str, str]]
    reports: dict[str, dict]
    targets: Callable[[dict], list[str]]

    @property
    def rules_dir(self) -> PurePosixPath:
        return PurePosixPath("rules") / self.name

    @property
    def prompts_dir(self) -> PurePosixPath:
        return PurePosixPath("prompts") / self.name

    @property
    def notebooks_dir(self) -> PurePosixPath:
        return PurePosixPath("notebooks") / self.name

    @property
    def report_dir(self) -> PurePosixPath:
        return PurePosixPath("report") / self.name

    def caption(self, report: str) -> str:
        """The caption file of one of this family's reports, relative to the repository root."""
        return str(self.report_dir / f"{report}.rst")
