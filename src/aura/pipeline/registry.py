"""Every stage the workflow runs, by the name used on the command line and in rules/: the merge of
every registered family's stages (enabled or not: a stage name is unique across families)."""
from __future__ import annotations

from ..families import merged
from .stage import Stage  # noqa: F401 - re-exported: a stage's declaration (aura.pipeline.stage)

STAGES: dict[str, Stage] = merged("stage", lambda family: family.stages)
