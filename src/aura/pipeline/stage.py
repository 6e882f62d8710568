"""A stage, declared once: its code, its inputs and outputs, its options, its prompts and its model calls.

From the declaration the rest follows, so nothing is kept in step by hand:

- the rule's command line (`python -m aura <stage> --in ... --out ... --calls-log ...`) and its prompt inputs
  (aura.pipeline.rules_support: ``S.inputs``, ``S.outputs``, ``S.command``);
- the prompts a job may render (``StageContext.use_prompt`` refuses one the stage did not declare);
- what `aura estimate` prices (``aura.estimate.stage_line``: a declared call's role, prompts and output
  tokens; the family's estimate supplies only the counts).

A manifest imports nothing heavy: the code is named by a ``"package.module:function"`` string.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from importlib import import_module
from typing import Any, Callable

OptionCheck = Callable[[str], "str | None"]  # a --option value -> None (fine) or what is wrong with it
PROMPT_FILES = "prompt_files"  # the rule input holding a stage's prompt files (they rerun it): no --in may take it


def check_target(target: str | None) -> None:
    """A ``"package.module:attribute"`` string (None: no target), checked for shape, nothing imported."""
    if target is None:
        return
    module, sep, attribute = target.partition(":")
    if not (sep and module and attribute.isidentifier()):
        raise ValueError(f"target '{target}' is not 'package.module:attribute'")


def load_target(target: str) -> Any:
    """The object a ``"package.module:attribute"`` string names (imported now)."""
    check_target(target)
    module, _, attribute = target.partition(":")
    return getattr(import_module(module), attribute)


@dataclass(frozen=True)
class Call:
    """One kind of model call a stage makes.

    role:       the LLM-layer role (``LLMClient.run``'s role: evaluated, judge, reviewer, generator, ...); None
                for a call that is not a chat call (an images endpoint).
    model:      which model setting answers it: ``"--model"`` / ``"--judge"`` (the job's), or a dotted config
                path (``"pasbench.judge"``).
    prompts:    the prompts its requests render (a subset of the stage's; empty: all of them).
    out_tokens: completion tokens per call (``estimate.completion_tokens[<stage>]`` overrides it).
    per_item:   calls per item the family's estimate counts.
    """
    role: str | None
    model: str
    prompts: tuple[str, ...] = ()
    out_tokens: int = 150
    per_item: float = 1.0


@dataclass(frozen=True)
class Stage:
    """One stage: ``python -m aura <name>`` runs ``target`` (a function taking a StageContext).

    help:    the command's help line.
    inputs:  ``--in`` name -> the layout key it reads by default (None: the rule names it, or it is optional).
             A list input is passed as ``name_0``, ``name_1``, ...
    outputs: ``--out`` name -> layout key (None: the rule names it).
    options: ``--option KEY=VALUE`` keys, each with a check of the value (None = fine).
    prompts: the prompts its jobs render: the rule's prompt inputs, and all ``use_prompt`` accepts.
    calls:   kind -> Call: the model calls it makes (any: its job writes a calls log).
    """
    help: str
    target: str
    options: dict[str, OptionCheck] = field(default_factory=dict)
    inputs: dict[str, str | None] = field(default_factory=dict)
    outputs: dict[str, str | None] = field(default_factory=dict)
    prompts: tuple[str, ...] = ()
    calls: dict[str, Call] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_target(self.target)
        if PROMPT_FILES in self.inputs:
            raise ValueError(f"input name '{PROMPT_FILES}' is the rule's own (the stage's prompt files); rename it")
        for kind, call in self.calls.items():
            stray = set(call.prompts) - set(self.prompts)
            if stray:
                raise ValueError(f"call '{kind}' renders prompt(s) {sorted(stray)} the stage does not declare")

    def entry(self) -> Callable[[Any], None]:
        return load_target(self.target)

    def run(self, ctx) -> None:
        self.entry()(ctx)

    def call(self, kind: str) -> Call:
        if kind not in self.calls:
            raise KeyError(f"the stage declares no call '{kind}' (calls: {sorted(self.calls)})")
        return self.calls[kind]


def one_of(*allowed: str) -> OptionCheck:
    """An option check: the value must be one of `allowed`."""
    return lambda v: None if v in allowed else f"expected one of {list(allowed)}"
