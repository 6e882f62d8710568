"""Helpers the Snakefile calls (kept here so rules/ stay free of logic)."""
from __future__ import annotations

from ..io import canonical_json, sha256_text
from .layout import layout

# Figure/table manifest: name -> notebook and the produced files (layout keys) it reads.
# `snakemake figures/<name>.pdf` re-renders one of them from those files, with no model call.
REPORTS = {
    "fig7_detection_levels": {
        "notebook": "notebooks/fig7_detection_levels.ipynb",
        "inputs": ["fig4_detection"],
        "caption": "Figure 7: distribution of detection levels D0-D3 per model, No-Safe-Path and Safe-Path.",
    },
    "table34_case_study": {
        "notebook": "notebooks/tab34_case_study.ipynb",
        "inputs": ["table34_case_study"],
        "figure": False,
        "tables": ["table34_case_study"],
        "caption": "Table 34: one scenario and its variants across models, panel labels per model.",
    },
    "table38_prompt_format": {
        "notebook": "notebooks/tab38_prompt_format.ipynb",
        "inputs": ["table38_prompt_format"],
        "figure": False,
        "tables": ["table38_prompt_format"],
        "needs_format_models": True,
        "caption": "Table 38: unsafe rates on the stratified sample under the ReAct and the action-only interface.",
    },
    "construction_funnel": {
        "notebook": "notebooks/construction_counts.ipynb",
        "inputs": ["construction_composition", "construction_funnel"],
        "caption": "Construction funnel (candidates, parseable, accepted at each stage), ours beside the paper's.",
        "tables": ["construction_composition", "construction_funnel"],
    },
    "unsafe_rates": {
        "notebook": "notebooks/fig_unsafe_rates.ipynb",
        "inputs": ["model_rates"],
        "caption": "Unsafe-action rate per evaluated model, all rows / NSP / SP, with Wilson 95% CIs.",
    },
    "table33_overall": {
        "notebook": "notebooks/tab33_overall.ipynb",
        "inputs": ["table33_overall"],
        "figure": False,
        "caption": (
            "Table 33: per-model unsafe-action rate over all, No-Safe-Path and Safe-Path rows, SP safe non-refusal and "
            "over-refusal, and NSP risk-aware, aware-unsafe and miss+execute shares, each with its n and excluded rows."
            " Rendered by notebooks/tab33_overall.ipynb from results/stats/table33_overall.csv."
        ),
        "tables": ["table33_overall"],
    },
    "table31_bootstrap": {
        "notebook": "notebooks/tab31_bootstrap.ipynb",
        "inputs": ["table31_bootstrap"],
        "figure": False,
        "caption": (
            "Table 31: per-model NSP and SP unsafe rates and their difference with source-seed-clustered percentile 95%"
            " bootstrap intervals, seeds and excluded rows. Rendered by notebooks/tab31_bootstrap.ipynb from "
            "results/stats/table31_bootstrap.csv."
        ),
        "tables": ["table31_bootstrap"],
    },
    "table32_matched_pairs": {
        "notebook": "notebooks/tab32_matched_pairs.ipynb",
        "inputs": ["table32_matched_pairs"],
        "figure": False,
        "caption": (
            "Table 32: matched NSP/SP pairs per model, unsafe rates on each side, their difference with a seed-"
            "clustered 95% interval, exact McNemar p and excluded pairs. Rendered by "
            "notebooks/tab32_matched_pairs.ipynb from results/stats/table32_matched_pairs.csv."
        ),
        "tables": ["table32_matched_pairs"],
    },
    "table35_36_flips": {
        "notebook": "notebooks/tab35_36_flips.ipynb",
        "inputs": ["table35_flips", "table36_failure_mechanism"],
        "figure": False,
        "caption": (
            "Tables 35 and 36: SAFE to UNSAFE flip rates on the RS2 and RS5 variations of No-Safe-Path originals, and "
            "the D0/D1 vs D2/D3 detection shares among those failures. Rendered by notebooks/tab35_36_flips.ipynb from "
            "results/stats/table35_flips.csv and results/stats/table36_failure_mechanism.csv."
        ),
        "tables": ["table35_flips", "table36_failure_mechanism"],
    },
    "table37_top_combinations": {
        "notebook": "notebooks/tab37_top_combinations.ipynb",
        "inputs": ["table37_top_combinations"],
        "figure": False,
        "caption": (
            "Table 37: each model's top-3 (detection, action type) combinations as a share of its unsafe outcomes. "
            "Rendered by notebooks/tab37_top_combinations.ipynb from results/stats/table37_top_combinations.csv."
        ),
        "tables": ["table37_top_combinations"],
    },
    "fig4_detection": {
        "notebook": "notebooks/fig4_detection.ipynb",
        "inputs": ["fig4_detection"],
        "caption": (
            "Figure 4: unsafe-action rate per model at each risk-detection level D0-D3, No-Safe-Path and Safe-Path "
            "panels, with n per bar and rows lacking a detection label counted. Rendered by "
            "notebooks/fig4_detection.ipynb from results/stats/fig4_detection.csv."
        ),
    },
    "fig5_action_types": {
        "notebook": "notebooks/fig5_action_types.ipynb",
        "inputs": ["fig5_action_types"],
        "caption": (
            "Figure 5: action-type shares A0-A5 per model in No-Safe-Path and Safe-Path rows, each split into unsafe "
            "(hatched), safe and unlabelled parts. Rendered by notebooks/fig5_action_types.ipynb from "
            "results/stats/fig5_action_types.csv."
        ),
    },
    "fig6_dimensions": {
        "notebook": "notebooks/fig6_dimensions.ipynb",
        "inputs": ["fig6_dimensions"],
        "caption": (
            "Figure 6: unsafe-action rate per model on originals and on each variation dimension RS1-RS6 and SD1-SD5, "
            "with n and excluded rows per cell; grey cells have no labelled row. Rendered by "
            "notebooks/fig6_dimensions.ipynb from results/stats/fig6_dimensions.csv."
        ),
    },
    "fig8_cells": {
        "notebook": "notebooks/fig8_cells.ipynb",
        "inputs": ["fig8_cells"],
        "caption": (
            "Figure 8: per model, No-Safe-Path rows by detection level (D0-D3) and action type (A0-A5): count and "
            "unsafe share of each cell. Rendered by notebooks/fig8_cells.ipynb from results/stats/fig8_cells.csv."
        ),
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


def model_hash(config: dict, *models: str) -> str:
    return section_hash(*(config["models"][m] for m in models),
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


def report_targets(config: dict) -> list[str]:
    names = [n for n, spec in REPORTS.items()
             if not (spec.get("needs_format_models") and not config["evaluate"]["format_models"])]
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
    """papermill -p arguments: every input path by layout key, the output paths, the model groups."""
    lay, spec = layout(config), REPORTS[name]
    args = [f"-p {key} {lay[key]}" for key in spec["inputs"]]
    if spec.get("figure", True):
        args += [f"-p out_pdf {lay['figures']}/{name}.pdf", f"-p out_png {lay['figures']}/{name}.png"]
    return " ".join([*args, f"-p tables_dir {lay['tables']}"])
