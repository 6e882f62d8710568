"""LPS-Bench's DAG helpers: what its rules (rules/lpsbench/*.smk) compute from the config. Kept here, not as
`def`s in the rule files, as every family's are (aura/dag.py, pasbench/dag.py)."""
from __future__ import annotations

from pathlib import Path

from aura.pipeline import rules_support as S
from aura.pipeline.layout import layout

from . import cases_dir, section
from .spec import EMULATOR_PROMPT, USER_PROMPT


def model_hash(config: dict, *models: str | None) -> str:
    """The rerun hash of the models a job calls (None: not called)."""
    return S.model_hash(config, *[m for m in models if m])


def episode_models(config: dict, wc) -> list[str | None]:
    """The models an episode job calls: the agent, the emulator, the simulated user when mitigated."""
    lp = section(config)
    emulated = lp["tools"].get("backend", "emulated") == "emulated"
    return [wc.model, lp["emulator"] if emulated else None,
            lp["user_simulator"] if wc.variant == "mitigated" and lp["ask_user_extension"] else None]


def prompts_of(config: dict, variant: str) -> tuple[str, ...]:
    """The prompts an episodes job renders: the agent's, the emulator's (emulated back-end), the mitigations'
    and the simulated user's (ask_user extension). Here, not in episodes.py, so that reading the Snakefile does
    not import the agent and its MCP client (a second of every snakemake invocation)."""
    lp = section(config)
    emulated = ((lp.get("tools") or {}).get("backend") or "emulated") == "emulated"
    names = ("agent_raw",) + ((EMULATOR_PROMPT,) if emulated else ())
    if variant == "mitigated":
        names += ("agent_clarify", "agent_safety") + ((USER_PROMPT,) if lp.get("ask_user_extension") else ())
    return names


def from_generated(config: dict) -> bool:
    """Cases from the generated cases the review kept (lpsbench.cases.generated), not a folder or download."""
    return bool(section(config)["cases"].get("generated"))


def download(config: dict) -> dict | None:
    """lpsbench.cases.download when it is on and the cases are not the generated ones, else None."""
    spec = section(config)["cases"].get("download") or {}
    return spec if spec and spec.get("enabled", True) and not from_generated(config) else None


def cases_folder(config: dict) -> str:
    return layout(config)["lpsbench_generated_cases"] if from_generated(config) else cases_dir(config)


def case_files(config: dict) -> list[str]:
    """The case files, so an edited case reruns the cases job; the folder itself when it does not exist yet
    (Snakemake then names it as missing); the review job's output folder for generated cases."""
    if from_generated(config):
        return [layout(config)["lpsbench_generated_cases"]]
    if download(config):
        return [f"{download(config)['dest']}/.fetched.json"]
    folder = Path(cases_folder(config))
    return sorted(str(p) for p in folder.glob("*/*.json")) if folder.is_dir() else [cases_folder(config)]
