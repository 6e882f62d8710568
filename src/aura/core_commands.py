"""The core's own commands of `python -m aura`, in one table: the CLI builds their parsers from it (aura.commands)
and the family registry refuses a family stage or command that would take one of the names (aura.families).

name -> (help line, what runs it): a module defining `add_arguments(parser)` and `run(args) -> int`, or a
``"module:object"`` naming an object with both. Nothing is imported here; a command's module is imported when
the CLI's parser is built (its arguments), so those modules stay light and import what they need inside `run`.
"""
from __future__ import annotations

CORE_COMMANDS: dict[str, tuple[str, str]] = {
    "estimate": ("calls, tokens and cost the run would spend (cache hits excluded); spends nothing",
                 "aura.commands:ESTIMATE"),
    "summary": ("one line per stage: items ok / unparsed / failed / n/a, failed jobs", "aura.commands:SUMMARY"),
    "render": ("execute one report notebook with papermill (kernel start-up retried)", "aura.commands:RENDER"),
    "cache": ("export the cache entries a run used into one checked archive, or import one", "aura.llm.cache_archive"),
    "view": ("browse a run's produced files in a browser (127.0.0.1), or --export DIR a static site",
             "aura.web.viewer.command"),
    "preflight": ("before a paid run: one short real call per model and capability the run uses, and its cost",
                  "aura.preflight"),
    "rehearse": ("a config's whole run against simulated models with planted numbers: offline, no key, no cost",
                 "aura.simulator.rehearse"),
    "export-dataset": ("every family's benchmark as a Hugging Face dataset folder (Parquet, card, Croissant record)",
                       "aura.export_dataset.command"),
}
