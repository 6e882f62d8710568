"""PaSBench's DAG helpers: what its rules (rules/pasbench/*.smk) compute from the config. Kept here, not as
`def`s in the rule files, as every family's are (aura/dag.py, lpsbench/dag.py)."""
from __future__ import annotations

from pathlib import Path

from aura.pipeline import rules_support as S

from . import section


def download(config: dict) -> dict | None:
    """pasbench.data.download when it is on, else None."""
    spec = section(config)["data"].get("download") or {}
    return spec if spec and spec.get("enabled", True) else None


def data_dir(config: dict) -> str:
    """The folder the items are loaded from: the download's destination, or pasbench.data.path."""
    spec = download(config)
    return spec["dest"] if spec else section(config)["data"].get("path")


def data_files(config: dict) -> list[str]:
    """The data folder's files (JSON files, source.txt, images), so an edited file reruns the items job;
    the folder itself when it does not exist yet (the items job then says what is missing); and the sub-image
    count file (pasbench.data.sub_images) when it exists (when it does not, the items job says how to make it)."""
    data = section(config)["data"]
    counts = [data["sub_images"]] if data.get("sub_images") and Path(data["sub_images"]).is_file() else []
    if download(config):
        return [f"{download(config)['dest']}/.fetched.json", *counts]
    folder = Path(data_dir(config))
    if not folder.is_dir():
        return [data_dir(config)]
    names = ("text_eval_hugging.json", "multi_modal_eval_hugging.json", "severity.json", "source.txt")
    images = Path(data["images"]) if data.get("images") else folder / "images"
    return ([str(folder / n) for n in names if (folder / n).exists()]
            + sorted(str(p) for p in images.glob("*") if p.is_file()) + counts)


def model_hash(config: dict, *models: str | None) -> str:
    """The rerun hash of the models a job calls (None: not called)."""
    return S.model_hash(config, *[m for m in models if m])


def own_params(config: dict, model: str) -> str:
    """A model's pasbench.model_params entry as a hash suffix of its jobs' params ("" when it has none, so the
    other models' jobs keep their params and do not rerun)."""
    own = section(config).get("model_params") or {}
    return "+" + S.section_hash(own[model]) if model in own else ""
