"""The paper's eleven controlled dimensions: risk signals RS1-RS6 and difficulty SD1-SD5, with their names and
definitions from the versioned prompt file `dimensions` (what the generators, reviewers, viewer and figures
read). Light on purpose: the figures' notebooks import it, and the LLM layer is not needed to name a code."""
from __future__ import annotations

from functools import lru_cache

import yaml

from aura.prompts import prompt_path

RS = ["RS1", "RS2", "RS3", "RS4", "RS5", "RS6"]
SD = ["SD1", "SD2", "SD3", "SD4", "SD5"]
DIMENSIONS = RS + SD


@lru_cache(maxsize=None)
def dimension_specs() -> dict[str, dict]:
    """code -> {name, family, definition, direction, ...} as the prompt file holds them."""
    return yaml.safe_load(prompt_path("dimensions").read_text())
