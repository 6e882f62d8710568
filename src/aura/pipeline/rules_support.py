"""Helpers the Snakefile and every family's rules call (kept here so rules/ stay free of logic).

Nothing here knows a family: reports, captions and notebooks come from the manifests. A family's own
DAG helpers live in its package and its rules import them from there.
"""
from __future__ import annotations

from pathlib import Path

from ..config import repo_path
from ..families import family_of_report, merged
from ..io import canonical_json, sha256_text
from ..prompts import prompt_file  # noqa: F401 - rules list S.prompt_file(name): the version in use
from .layout import layout

# Figure/table manifest of every family (report name -> notebook, inputs = layout keys, figure, tables,
# needs); a report's caption is <the family's report folder>/<name>.rst. `snakemake figures/<name>.pdf`
# re-renders one of them from those files, with no model call.
REPORTS: dict[str, dict] = merged("report", lambda family: family.reports)


def workflow_path(path: Path) -> str:
    """A family file as rules name it: relative to the repository when it lies inside (the built-in
    families' files), else absolute (a family installed from another repository)."""
    return repo_path(path)


NOT_DATA = {"prompt", "prompts", "dims", "notebook", "marker", "reference"}


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


def caption(name: str) -> str:
    """A report's caption file (workflow_path): <the family's report folder>/<name>.rst."""
    return workflow_path(family_of_report(name).caption(name))


def report_outputs(config: dict, name: str) -> dict:
    """A figure (pdf + png, in the Snakemake report with its caption) and/or tables (csv + md)."""
    from snakemake.io import report

    lay, spec = layout(config), REPORTS[name]
    out = {}
    if spec.get("figure", True):
        out["pdf"] = report(f"{lay['figures']}/{name}.pdf", caption=caption(name), category="Figures")
        out["png"] = f"{lay['figures']}/{name}.png"
    for t in spec.get("tables", []):
        out[f"{t}_csv"] = f"{lay['tables']}/{t}.csv"
        out[f"{t}_md"] = f"{lay['tables']}/{t}.md"
    return out


def report_enabled(config: dict, name: str) -> bool:
    """A report renders when its family's condition holds (`needs(config) -> bool`; none = always)."""
    needs = REPORTS[name].get("needs")
    return bool(needs(config)) if needs is not None else True


def report_targets(config: dict, reports) -> list[str]:
    """Figure/table files of the enabled reports among `reports` (a family's report names)."""
    names = [n for n in reports if report_enabled(config, n)]
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

    Inputs named prompt/prompts/dims/notebook/marker/reference are there for Snakemake's rerun logic only (a
    reproduction stage reads its family's reference folder from the package).
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
    notebook = workflow_path(family_of_report(name).notebook(name))
    return {"notebook": notebook, **{key: lay[key] for key in spec["inputs"]}}


def report_params(config: dict, name: str) -> str:
    """`aura render` -p arguments: every input path by layout key, the output paths, the model groups."""
    lay, spec = layout(config), REPORTS[name]
    args = [f"-p {key} {lay[key]}" for key in spec["inputs"]]
    if spec.get("figure", True):
        args += [f"-p out_pdf {lay['figures']}/{name}.pdf", f"-p out_png {lay['figures']}/{name}.png"]
    return " ".join([*args, f"-p tables_dir {lay['tables']}"])
