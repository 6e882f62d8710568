"""Helpers the Snakefile calls (kept here so rules/ stay free of logic)."""
from __future__ import annotations

from ..config import vendor_overlaps  # noqa: F401 - the Snakefile calls it as S.vendor_overlaps
from ..io import canonical_json, sha256_text
from ..prompts import prompt_file  # noqa: F401 - rules list S.prompt_file(name): the version in use
from ..stats.human_validation import read_human_labels
from .layout import layout

# Figure/table manifest: name -> notebook and the produced files (layout keys) it reads; a
# figure's caption is report/<name>.rst. `snakemake figures/<name>.pdf` re-renders one of them
# from those files, with no model call.
REPORTS = {
    "fig7_detection_levels": {
        "notebook": "notebooks/fig7_detection_levels.ipynb",
        "inputs": ["fig4_detection"],
    },
    "table34_case_study": {
        "notebook": "notebooks/tab34_case_study.ipynb",
        "inputs": ["table34_case_study"],
        "figure": False,
        "tables": ["table34_case_study"],
    },
    "table38_prompt_format": {
        "notebook": "notebooks/tab38_prompt_format.ipynb",
        "inputs": ["table38_prompt_format"],
        "figure": False,
        "tables": ["table38_prompt_format"],
        "needs": "format_models",
    },
    "judge_reliability": {
        "notebook": "notebooks/tab_judge_reliability.ipynb",
        "inputs": ["judge_reliability"],
        "figure": False,
        "tables": ["judge_reliability"],
    },
    "table3_human_validation": {
        "notebook": "notebooks/tab3_human_validation.ipynb",
        "inputs": ["table3_human_validation"],
        "figure": False,
        "tables": ["table3_human_validation"],
        "needs": "human_labels",
    },
    "table25_judge_consistency": {
        "notebook": "notebooks/tab25_judge_consistency.ipynb",
        "inputs": ["table25_judge_consistency"],
        "figure": False,
        "tables": ["table25_judge_consistency"],
        "needs": "consistency_models",
    },
    "table21_22_judge_accuracy": {
        "notebook": "notebooks/tab21_22_judge_accuracy.ipynb",
        "inputs": ["table21_22_judge_accuracy"],
        "figure": False,
        "tables": ["table21_judge_accuracy", "table22_judge_accuracy_by_consensus"],
        "needs": "human_labels",
    },
    "table23_ensembles": {
        "notebook": "notebooks/tab23_ensembles.ipynb",
        "inputs": ["table23_ensembles"],
        "figure": False,
        "tables": ["table23_ensembles"],
        "needs": "validation_judges",
    },
    "table24_vendor_overlap": {
        "notebook": "notebooks/tab24_vendor_overlap.ipynb",
        "inputs": ["table24_vendor_overlap"],
        "figure": False,
        "tables": ["table24_vendor_overlap"],
        "needs": "vendor_overlap",
    },
    "construction_funnel": {
        "notebook": "notebooks/construction_counts.ipynb",
        "inputs": ["construction_composition", "construction_funnel"],
        "tables": ["construction_composition", "construction_funnel"],
    },
    "unsafe_rates": {
        "notebook": "notebooks/fig_unsafe_rates.ipynb",
        "inputs": ["model_rates"],
    },
    "table33_overall": {
        "notebook": "notebooks/tab33_overall.ipynb",
        "inputs": ["table33_overall"],
        "figure": False,
        "tables": ["table33_overall"],
    },
    "table31_bootstrap": {
        "notebook": "notebooks/tab31_bootstrap.ipynb",
        "inputs": ["table31_bootstrap"],
        "figure": False,
        "tables": ["table31_bootstrap"],
    },
    "table32_matched_pairs": {
        "notebook": "notebooks/tab32_matched_pairs.ipynb",
        "inputs": ["table32_matched_pairs"],
        "figure": False,
        "tables": ["table32_matched_pairs"],
    },
    "table35_36_flips": {
        "notebook": "notebooks/tab35_36_flips.ipynb",
        "inputs": ["table35_flips", "table36_failure_mechanism"],
        "figure": False,
        "tables": ["table35_flips", "table36_failure_mechanism"],
    },
    "table37_top_combinations": {
        "notebook": "notebooks/tab37_top_combinations.ipynb",
        "inputs": ["table37_top_combinations"],
        "figure": False,
        "tables": ["table37_top_combinations"],
    },
    "fig4_detection": {
        "notebook": "notebooks/fig4_detection.ipynb",
        "inputs": ["fig4_detection"],
    },
    "fig5_action_types": {
        "notebook": "notebooks/fig5_action_types.ipynb",
        "inputs": ["fig5_action_types"],
    },
    "fig6_dimensions": {
        "notebook": "notebooks/fig6_dimensions.ipynb",
        "inputs": ["fig6_dimensions"],
    },
    "fig8_cells": {
        "notebook": "notebooks/fig8_cells.ipynb",
        "inputs": ["fig8_cells"],
    },
}


NOT_DATA = {"prompt", "prompts", "dims", "notebook", "marker"}


def resource_name(endpoint: str) -> str:
    return "api_" + "".join(c if c.isalnum() else "_" for c in endpoint)


def register_endpoint_resources(workflow, config: dict) -> None:
    """One global Snakemake resource per endpoint caps how many jobs call it at once.

    A value given on the command line (--resources api_x=N) wins over the config.
    """
    for name, ep in config["endpoints"].items():
        res = resource_name(name)
        if res not in workflow.global_resources:
            workflow.register_resource(res, ep.get("max_parallel_jobs", 4))


def endpoint_resource(config: dict, model: str) -> dict[str, int]:
    return {resource_name(config["models"][model]["endpoint"]): 1}


def section_hash(*parts) -> str:
    """Hash of the config that matters to a job: a change there reruns that job only."""
    return sha256_text(canonical_json(list(parts)))[:16]


# Model fields that only label tables (or select analyses), never change a call: editing them reruns nothing.
DISPLAY_ONLY = ("label", "group", "vendor")


def model_hash(config: dict, *models: str) -> str:
    return section_hash(*({k: v for k, v in config["models"][m].items() if k not in DISPLAY_ONLY} for m in models),
                        *(config["endpoints"][config["models"][m]["endpoint"]] for m in models))


def shards(config: dict) -> list[int]:
    return list(range(config["evaluate"]["shards"]))


def report_outputs(config: dict, name: str) -> dict:
    """A figure (pdf + png, in the Snakemake report with its caption) and/or tables (csv + md)."""
    from snakemake.io import report

    lay, spec = layout(config), REPORTS[name]
    out = {}
    if spec.get("figure", True):
        out["pdf"] = report(f"{lay['figures']}/{name}.pdf", caption=f"../report/{name}.rst", category="Figures")
        out["png"] = f"{lay['figures']}/{name}.png"
    for t in spec.get("tables", []):
        out[f"{t}_csv"] = f"{lay['tables']}/{t}.csv"
        out[f"{t}_md"] = f"{lay['tables']}/{t}.md"
    return out


def report_enabled(config: dict, name: str) -> bool:
    """Optional analyses render only when configured (format models, a replacement judge with overlaps)."""
    needs = REPORTS[name].get("needs")
    if needs == "format_models":
        return bool(config["evaluate"]["format_models"])
    if needs == "vendor_overlap":
        return bool(vendor_overlaps(config))
    if needs == "consistency_models":
        return bool(config["evaluate"]["consistency_models"])
    if needs == "human_labels":
        return bool(config["paths"].get("human_labels"))
    if needs == "validation_judges":
        return len(validation_judges(config)) > 3
    return True


def consistency_judgments(config: dict) -> list[str]:
    """Table 25 inputs: every consistency model's judgments by every panel judge, run 0 (the main
    judging) and the repeats 1..runs-1."""
    lay, ev = layout(config), config["evaluate"]
    judges = list(dict.fromkeys(config["roles"]["judges"]))
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
    return list(dict.fromkeys(config["roles"].get("validation_judges") or []))


def human_label_models(config: dict) -> list[str]:
    """Evaluated models named in the human-label CSV (read, and checked, when the DAG is built)."""
    path = config["paths"]["human_labels"]
    models = sorted(set(read_human_labels(path)["model"]))
    unknown = [m for m in models if m not in config["roles"]["evaluated"]]
    if unknown:
        raise ValueError(f"{path}: model(s) {unknown} are not evaluated models (roles.evaluated)")
    return models


def scoring_judgments(config: dict, model: str, judge: str) -> list[str]:
    """The main judge job's outputs for (model, judge) when the judge is also a scoring judge: a
    validation job then waits for them and answers from the cache instead of calling twice."""
    if judge not in config["roles"]["judges"] or model not in config["roles"]["evaluated"]:
        return []
    return [layout(config)["judgments"].format(model=model, judge=judge, shard=s) for s in shards(config)]


def validation_judgments(config: dict) -> list[str]:
    judges = validation_judges(config)
    if not judges:
        return []
    lay = layout(config)
    return [lay["validation_judgments"].format(model=m, judge=j) for m in human_label_models(config) for j in judges]


def report_targets(config: dict) -> list[str]:
    names = [n for n in REPORTS if report_enabled(config, n)]
    return [str(path) for name in names for path in report_outputs(config, name).values()]


def endpoint_resources(config: dict, model_of) -> dict:
    """Resources for a rule whose model depends on wildcards: 1 unit of its endpoint's resource.

    model_of(wildcards) -> model name. Every endpoint resource is declared; all but one are 0.
    """
    out = {}
    for name in config["endpoints"]:
        res = resource_name(name)
        out[res] = (lambda wc, _ep=name: int(config["models"][model_of(wc)]["endpoint"] == _ep))
    return out


def in_args(input) -> str:
    """`--in name=path` for every named data input of a job; a list input becomes name_0, name_1, ...

    Inputs named prompt/prompts/dims/notebook are there for Snakemake's rerun logic only.
    """
    args = []
    for name, value in input.items():
        if name in NOT_DATA:
            continue
        if isinstance(value, (list, tuple)) or hasattr(value, "_names"):
            args += [f"--in {name}_{i}={path}" for i, path in enumerate(value)]
        else:
            args.append(f"--in {name}={value}")
    return " ".join(args)


def out_args(output) -> str:
    """`--out name=path` for every named output of a job."""
    return " ".join(f"--out {name}={path}" for name, path in output.items())


def report_inputs(config: dict, name: str) -> dict[str, str]:
    lay = layout(config)
    spec = REPORTS[name]
    return {"notebook": spec["notebook"], **{key: lay[key] for key in spec["inputs"]}}


def report_params(config: dict, name: str) -> str:
    """`aura render` -p arguments: every input path by layout key, the output paths, the model groups."""
    lay, spec = layout(config), REPORTS[name]
    args = [f"-p {key} {lay[key]}" for key in spec["inputs"]]
    if spec.get("figure", True):
        args += [f"-p out_pdf {lay['figures']}/{name}.pdf", f"-p out_png {lay['figures']}/{name}.png"]
    return " ".join([*args, f"-p tables_dir {lay['tables']}"])
