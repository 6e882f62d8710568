"""What a benchmark family is: the manifest through which it hands the core everything it brings.

A family is a package that registers its manifest (a ``Family``) under the entry-point group
``aura.families`` (``[project.entry-points."aura.families"]`` in its pyproject.toml); the three built-in
families register the same way. The core never imports a family by name: it asks the registry
(aura.families) for the manifests and reads them.

Files. A family's rules, prompts, notebooks and report captions lie in four folders under its
``root``: ``<root>/rules``, ``<root>/prompts``, ``<root>/notebooks``, ``<root>/report``, each with a
``<name>/`` level when ``nested`` (the built-in families: root = the repository, so ``rules/aura/``,
``prompts/pasbench/`` ... stay where users know them). A plugin from another repository passes
``root=Path(__file__).parent`` and ``nested=False`` and carries its files inside its package.

A manifest imports nothing heavy: a stage names its entry point as a string, and so do the estimate,
viewer and command hooks; their modules are imported only when used, so every job starts fast.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

# A stage's declaration lives in the core (aura.pipeline.stage); re-exported here for the manifests.
from aura.pipeline.stage import Call, OptionCheck, Stage, check_target, load_target, one_of  # noqa: F401,E402


@dataclass(frozen=True, eq=False)  # compared and hashed by identity: one manifest per family
class Family:
    """One benchmark family's manifest.

    name:     the family's name: its config section (``<name>: {...}``), the folder level of its files,
              the prefix of its stage names, layout keys and report names (the first family, AURA,
              keeps its names unprefixed).
    stages:   CLI name -> Stage (`python -m aura <name>`); names are unique across families.
    layout:   raw config -> {layout key: path pattern}; reads only `paths` (merged for every family). None:
              derived from the stages' outputs (aura.families.derive, as are `targets` and `prompts`).
    reports:  report name -> spec: `notebook` (a file name in the family's notebook folder) or `draw` (a
              ``"module:function"`` drawing it from the inputs' rows: aura.notebook_helpers.draw_report),
              `inputs` (layout keys; a per-model key gives every model's file), optional `figure` (default
              True), `tables`, `needs(config) -> bool`. The caption is ``<report folder>/<report>.rst``.
    targets:  raw config -> the files `snakemake all` builds for this family. None: derived.
    root, nested: where the family's rules/, prompts/, notebooks/ and report/ folders are (see above).
    prompts:  prompt name -> (sub-folder of the family's prompt folder, '' for none; version in use).
              A changed prompt is a new file ``<name>.v<N+1>.md``; moving a stage to it is one edit here.
              None: each prompt a stage declares, at the highest version of its file.
    data_prompts: prompts that are data read as text (.yaml files), not chat prompts.
    schema:   the JSON schema of the family's config section (a dict; defaults are filled from it).
    paths_schema: folders the family adds to the shared `paths` section (property schemas by key).
    check:    raw config -> problems the schema cannot see (models by name), one line each.
    moved_keys: config keys that used to be elsewhere, old dotted path -> new one (`roles` -> `aura.roles`,
              `estimate.seeds` -> `aura.estimate.seeds`): a config using one gets one line saying where.
    estimate: ``"module:function"`` taking a Config, returning (lines, note) for `aura estimate`
              (aura.estimate.Line records).
    viewer:   ``"module:Class"``: the family's part of `aura view`, a subclass of
              aura.web.viewer.part.ViewerPart.
    commands: command name -> ``"module:object"`` with `help`, `add_arguments(parser)` and `run(args)`.
    export:   ``"module:function"`` taking a Config and returning the aura.export_dataset.Release of the
              family's benchmark, built from the run's produced files (`aura export-dataset`); None: none.
    order:    where the family comes in the default `families:` list (lower first, then by name).
    demo_data: the folders of the family's own demo data (what the default config reads), so a copy of the
              workflow (tests, a cluster's scratch folder) knows what to carry.
    tool_roles: the LLM-layer roles whose calls offer tools (`aura preflight` checks tool calling for the
              models that serve them).
    inspect_tasks: ``"module:attribute"``: a dict of task name -> Inspect task factory, registered as
              ``aura/<name>`` by aura.inspect_registry (imported only when Inspect loads it).
    reproduction: the layout key of the family's verdict table (aura.stats.reproduction): the end-of-run
              summary and `aura view` read it; None: the family has none.
    rehearsal: ``"module:function"``: the family's planter factory for `aura rehearse` (aura.simulator.plant:
              called with the run's Config and the Plan, returns a Planter answering the family's requests so
              that its paper's numbers are the expected values); the module also defines ``plantable(reference,
              config)``: per reference row, None (planted) or why it is not. None: the family plants nothing.
    """
    name: str
    title: str
    stages: dict[str, Stage]
    root: Path
    layout: Callable[[dict], dict[str, str]] | None = None  # None: derived from the stages (families/derive.py)
    reports: dict[str, dict] = field(default_factory=dict)
    targets: Callable[[dict], list[str]] | None = None  # None: derived from the stages and reports
    nested: bool = True
    prompts: dict[str, tuple[str, int]] | None = None  # None: derived from the stages and the prompt folder
    data_prompts: frozenset[str] = frozenset()
    schema: dict = field(default_factory=lambda: {"type": "object", "default": {}})
    paths_schema: dict = field(default_factory=dict)
    check: Callable[[dict], list[str]] | None = None
    moved_keys: dict[str, str] = field(default_factory=dict)
    estimate: str | None = None
    viewer: str | None = None
    commands: dict[str, str] = field(default_factory=dict)
    order: int = 100
    demo_data: tuple[Path, ...] = ()
    tool_roles: frozenset[str] = frozenset()
    inspect_tasks: str | None = None
    export: str | None = None  # see the docstring: the family's benchmark for `aura export-dataset`
    reproduction: str | None = None  # see the docstring: the layout key of its verdict table
    rehearsal: str | None = None  # see the docstring: its planter factory for `aura rehearse`

    def __post_init__(self) -> None:
        from .derive import layout_of, prompts_of, targets_of

        for target in (self.estimate, self.viewer, self.export, self.inspect_tasks, self.rehearsal,
                       *self.commands.values(), *(r["draw"] for r in self.reports.values() if "draw" in r)):
            check_target(target)
        # what the manifest leaves out, derived from what its stages declare (frozen: set once, here)
        if self.layout is None:
            object.__setattr__(self, "layout", layout_of(self))
        if self.targets is None:
            object.__setattr__(self, "targets", targets_of(self))
        if self.prompts is None:
            object.__setattr__(self, "prompts", prompts_of(self))

    def _folder(self, kind: str) -> Path:
        return Path(self.root) / kind / self.name if self.nested else Path(self.root) / kind

    @property
    def rules_dir(self) -> Path:
        return self._folder("rules")

    @property
    def prompts_dir(self) -> Path:
        return self._folder("prompts")

    @property
    def notebooks_dir(self) -> Path:
        return self._folder("notebooks")

    @property
    def report_dir(self) -> Path:
        return self._folder("report")

    def notebook(self, report: str) -> Path:
        """The file a report's render reads: its notebook, or for a ``draw`` report the module of its function."""
        spec = self.reports[report]
        if "draw" in spec:
            from importlib.util import find_spec

            return Path(find_spec(spec["draw"].partition(":")[0]).origin)
        return self.notebooks_dir / spec["notebook"]

    def caption(self, report: str) -> Path:
        """The caption file of one of this family's reports."""
        return self.report_dir / f"{report}.rst"

    def prompt_path(self, prompt: str) -> Path:
        folder, version = self.prompts[prompt]
        ext = "yaml" if prompt in self.data_prompts else "md"
        return (self.prompts_dir / folder if folder else self.prompts_dir) / f"{prompt}.v{version}.{ext}"
