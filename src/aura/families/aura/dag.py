"""The AURA family's DAG helpers: the inputs its rules compute from the config (shards, the Table 25
repeats, the validation panel on the human-labelled items). rules/aura/*.smk import them from here."""
from __future__ import annotations

from aura.pipeline.layout import layout

from .settings import roles, section, vendor_overlaps  # noqa: F401 - rules call A.vendor_overlaps


def shards(config: dict) -> list[int]:
    return list(range(section(config)["evaluate"]["shards"]))


def consistency_judgments(config: dict) -> list[str]:
    """Table 25 inputs: every consistency model's judgments by every panel judge, run 0 (the main
    judging) and the repeats 1..runs-1."""
    lay, ev = layout(config), section(config)["evaluate"]
    judges = list(dict.fromkeys(roles(config)["judges"]))
    out = []
    for m in ev["consistency_models"]:
        for j in judges:
            for shard in shards(config):
                out.append(lay["judgments"].format(model=m, judge=j, shard=shard))
                out += [lay["repeat_judgments"].format(model=m, judge=j, run=r, shard=shard)
                        for r in range(1, ev["consistency_runs"])]
    return out


def validation_judges(config: dict) -> list[str]:
    """The validation panel (Tables 3, 21-23), only with human labels; [] = the scoring panel votes."""
    if not config["paths"].get("human_labels"):
        return []
    return list(dict.fromkeys(roles(config).get("validation_judges") or []))


def human_label_models(config: dict) -> list[str]:
    """Evaluated models named in the human-label CSV (read, and checked, when the DAG is built)."""
    from .stats.human_validation import read_human_labels  # here: it brings pandas, scipy and statsmodels, which
    # reading the Snakefile needs only when a human-label file is named (most of a second of every invocation)

    path = config["paths"]["human_labels"]
    models = sorted(set(read_human_labels(path)["model"]))
    unknown = [m for m in models if m not in roles(config)["evaluated"]]
    if unknown:
        raise ValueError(f"{path}: model(s) {unknown} are not evaluated models (aura.roles.evaluated)")
    return models


def scoring_judgments(config: dict, model: str, judge: str) -> list[str]:
    """The main judge job's outputs for (model, judge) when the judge is also a scoring judge: a
    validation job then waits for them and answers from the cache instead of calling twice."""
    if judge not in roles(config)["judges"] or model not in roles(config)["evaluated"]:
        return []
    return [layout(config)["judgments"].format(model=model, judge=judge, shard=s) for s in shards(config)]


def validation_judgments(config: dict) -> list[str]:
    judges = validation_judges(config)
    if not judges:
        return []
    lay = layout(config)
    return [lay["validation_judgments"].format(model=m, judge=j) for m in human_label_models(config) for j in judges]
