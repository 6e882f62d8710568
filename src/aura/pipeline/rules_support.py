"""Helpers the Snakefile and every family's rules call (kept here so rules/ stay free of logic).

Nothing here knows a family: reports, captions and notebooks come from the manifests. A family's own
DAG helpers live in its package and its rules import them from there.
"""
from __future__ import annotations

import json
import shlex
from pathlib import Path

from ..config import repo_path
from ..families import family_of_report, merged
from ..families.derive import produced, report_paths
from ..io import canonical_json, sha256_text
from ..prompts import prompt_file
from .layout import layout
from .stage import PROMPT_FILES

# Figure/table manifest of every family (report name -> notebook, inputs = layout keys, figure, tables,
# needs); a report's caption is <the family's report folder>/<name>.rst. `snakemake figures/<name>.pdf`
# re-renders one of them from those files, with no model call.
REPORTS: dict[str, dict] = merged("report", lambda family: family.reports)


def workflow_path(path: Path) -> str:
    """A family file as rules name it: relative to the repository when it lies inside (the built-in
    families' files), else absolute (a family installed from another repository)."""
    return repo_path(path)


NOT_DATA = {PROMPT_FILES}  # a rule input the stage is not given: its prompt files (they rerun the job)


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


CAPTIONS = Path(".snakemake/aura/captions")  # a report's caption given as text in its spec, written as a file here


def caption(name: str) -> str:
    """A report's caption file (workflow_path): <the family's report folder>/<name>.rst, or for a report whose spec
    gives its `caption` as text, that text written to .snakemake/aura/captions/<name>.rst (the Snakemake report
    reads captions from files)."""
    text = REPORTS[name].get("caption")
    if text is None:
        return workflow_path(family_of_report(name).caption(name))
    path = CAPTIONS / f"{name}.rst"
    if not path.is_file() or path.read_text(encoding="utf-8") != text + "\n":
        from ..io import atomic_write_text

        atomic_write_text(path, text + "\n")
    return str(path)


def report_category(name: str) -> str:
    """A report's category in the Snakemake report: its family, numbered in the families' order ("1 AURA-Eval"), so
    the report lists the families as the workflow runs them (the report itself orders categories as it finds them)."""
    from ..families import names

    family = family_of_report(name)
    return f"{names().index(family.name) + 1} {family.title.split(':')[0]}"


def report_outputs(config: dict, name: str) -> dict:
    """A figure (pdf + png) and/or tables (csv + md); the pdf and each table's csv are in the Snakemake report with
    the report's caption, under its family's category (subcategories Figures and Tables)."""
    from snakemake.io import report

    category = report_category(name)
    shown = {"pdf": "Figures", **{f"{t}_csv": "Tables" for t in REPORTS[name].get("tables", [])}}
    return {key: report(path, caption=caption(name), category=category, subcategory=shown[key]) if key in shown
            else path for key, path in report_paths(config, name, REPORTS[name]).items()}


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


# --- a stage's rule from its declaration (aura.pipeline.stage.Stage) ------------------------------------
# A rule keeps the DAG (wildcards, expansions, resources, rerun hashes) and names its stage; the command line,
# the prompt inputs and the --in/--out names come from the stage's declaration:
#     input: **S.inputs(config, "judge", dataset=L["format_sample"])
#     output: **S.outputs(config, "judge")
#     params: io=S.io
#     shell: S.command("judge", model="{wildcards.model}", judge="{wildcards.judge}")
RERUN = "rerun_"  # an input under this prefix reruns the job when it changes; the stage is not given it


def _stage(name: str):
    from .registry import STAGES

    if name not in STAGES:
        raise ValueError(f"no stage '{name}' is registered (rules name a stage of a family's manifest)")
    return STAGES[name]


def _reserved(name: str) -> bool:
    """A name Snakemake keeps for itself on a rule's input/output (`items`, `keys`, ...)."""
    from snakemake.iocontainers import Namedlist

    return hasattr(Namedlist, name)


def _key(name: str) -> str:
    return f"{name}_" if _reserved(name) else name


def _name(key: str) -> str:
    return key[:-1] if key.endswith("_") and _reserved(key[:-1]) else key


def _declared(config: dict, stage: str, kind: str, given: dict, only) -> dict:
    declared = getattr(_stage(stage), kind)
    stray = [k for k in given if k not in declared]
    if stray:
        raise ValueError(f"stage '{stage}' declares no {kind[:-1]} '{stray[0]}' ({kind}: {sorted(declared)})")
    lay, out = layout(config), {}
    for name, key in declared.items():
        if only is not None and name not in only:
            continue
        if name in given:
            out[_key(name)] = given[name]
        elif key is not None:
            out[_key(name)] = lay[key]
    return out


def inputs(config: dict, stage: str, *, only=None, prompts=None, rerun: dict | None = None, **given) -> dict:
    """A rule's input for `stage`: each declared `--in` at its layout key unless `given` (a path, a list, a
    function of the wildcards; [] = none), only those in `only` when given; the stage's prompts (or the
    subset `prompts`: names, or a function of the wildcards giving them) so that an edited prompt reruns the
    job; `rerun`: files that rerun it but are not its inputs (a reference folder, a review file). An input or
    prompt the stage does not declare is an error."""
    st = _stage(stage)

    def files(names) -> list[str]:
        wrong = [p for p in names if p not in st.prompts]
        if wrong:
            raise ValueError(f"stage '{stage}' does not declare prompt '{wrong[0]}' (prompts: {list(st.prompts)})")
        return [prompt_file(p) for p in names]

    out = _declared(config, stage, "inputs", given, only)
    out.update({f"{RERUN}{k}": v for k, v in (rerun or {}).items()})
    if not st.prompts:
        return out
    chosen = st.prompts if prompts is None else prompts  # a function of the wildcards: its names, checked
    return {**out, PROMPT_FILES: (lambda wc: files(chosen(wc))) if callable(chosen) else files(chosen)}


def outputs(config: dict, stage: str, *, only=None, **given) -> dict:
    """A rule's output for `stage`: each declared `--out` at its layout key unless `given` (e.g. a
    directory()), only those in `only` when given."""
    return _declared(config, stage, "outputs", given, only)


def _pairs(flag: str, items) -> list[str]:
    args = []
    for key, value in items:
        name = _name(key)
        if isinstance(value, (list, tuple)) or hasattr(value, "_names"):
            args += [f"{flag} {name}_{i}={path}" for i, path in enumerate(value)]
        else:
            args.append(f"{flag} {name}={value}")
    return args


def io(wildcards, input, output) -> str:
    """A job's `--in name=path` (a list input: name_0, name_1, ...) and `--out name=path` arguments, from its
    rule's named input and output (the rule's `params: io=S.io`). Prompts and rerun-only inputs are left out."""
    ins = [(k, v) for k, v in input.items() if k not in NOT_DATA and not k.startswith(RERUN)]
    return " ".join([*_pairs("--in", ins), *_pairs("--out", output.items())])


def command(stage: str, *, model: str | None = None, judge: str | None = None, shard: str | None = None,
            options: dict | None = None, folders: dict | None = None) -> str:
    """The shell command of a rule running `stage` (Snakemake placeholders left for the job): the model,
    judge, shard and `--option`s given, folders it reads as `--in` (not Snakemake inputs), the rule's
    io, and the calls log when the stage declares model calls (log: main, calls), else `2> {log}`."""
    st = _stage(stage)
    unknown = [k for k in options or {} if k not in st.options] + [k for k in folders or {} if k not in st.inputs]
    if unknown:
        raise ValueError(f"stage '{stage}' declares no option or input '{unknown[0]}'")
    parts = ["{AURA}", stage, "--configfile {CONFIGFILE}"]
    # the CLI's job flags (aura.cli: the job's model, a second model it reads, e.g. a judge's, its shard)
    parts += [f"{flag} {value}" for flag, value in (("--model", model), ("--judge", judge), ("--shard", shard)) if value]
    parts += [f"--option {k}={v}" for k, v in (options or {}).items()]
    parts += [f"--in {k}={v}" for k, v in (folders or {}).items()]
    if st.inputs or st.outputs:
        parts.append("{params.io}")
    parts.append("--calls-log {log.calls} 2> {log.main}" if st.calls else "2> {log}")
    return " ".join(parts)


def _report_files(config: dict, name: str) -> dict[str, str | list[str]]:
    """A report's inputs by layout key: its path, or for a per-model key ({model} in its path) every file the
    stage writing it makes under this config (aura.families.derive.produced)."""
    lay, family = layout(config), family_of_report(name)
    out = {}
    for key in REPORTS[name]["inputs"]:
        out[key] = produced(family, config).get(key, []) if "{model}" in lay[key] else lay[key]
    return out


def report_inputs(config: dict, name: str) -> dict:
    notebook = workflow_path(family_of_report(name).notebook(name))
    return {"notebook": notebook, **_report_files(config, name)}


def report_params(config: dict, name: str) -> str:
    """`aura render` -p arguments: every input path by layout key (several files: a JSON list, which the notebook
    helpers read as one table), the output paths; a ``draw`` report's function as ``--draw``."""
    lay, spec = layout(config), REPORTS[name]
    args = [f"-p {key} {shlex.quote(json.dumps(value)) if isinstance(value, list) else value}"
            for key, value in _report_files(config, name).items()]
    if spec.get("figure", True):
        args += [f"-p out_pdf {lay['figures']}/{name}.pdf", f"-p out_png {lay['figures']}/{name}.png"]
    return " ".join([*args, f"-p tables_dir {lay['tables']}", *([f"--draw {spec['draw']}"] if "draw" in spec else [])])


# --- the rule of a stage, derived (a family that brings no rule file) -------------------------------------
def stage_rule(config: dict, family, stage: str) -> dict | None:
    """The rule a family without rule files gets for `stage` (aura.families.derive says which jobs run): its name
    (the stage's, '-' as '_'), input (an input its declaration leaves open is the file of the family's setting
    of the same name), output, params (io; a rerun hash of the models it calls and the family's section),
    resources (one unit of each endpoint its models use), log and shell (the job's model: the per-model
    setting's name as --model, a single other model setting as --judge, or as --model when it is the only
    one). None when no job of it runs under this config."""
    from ..families.derive import JOB_FLAGS, per_model_path, setting, stage_models

    st, rule = _stage(stage), stage.replace("-", "_")
    models = stage_models(family, st, config)
    if not models:
        return None
    section = config.get(family.name) or {}
    open_inputs = {name: section.get(name) for name, key in st.inputs.items() if key is None}
    unset = [name for name, value in open_inputs.items() if not value]
    if unset:
        raise ValueError(f"stage '{stage}': its input '{unset[0]}' is a file the config names: set "
                         f"{family.name}.{unset[0]}")
    each = per_model_path(family, st)
    fixed = [setting(config, c.model) for c in st.calls.values() if c.model not in JOB_FLAGS and c.model != each]
    fixed = list(dict.fromkeys(fixed))
    suffix = "_{model}" if each else ""
    logs = f"{config['paths']['logs']}/{rule}/{rule}{suffix}"
    log = {"main": f"{logs}.log", "calls": f"{logs}.calls.jsonl"} if st.calls else {"main": f"{logs}.log"}

    def used(wc=None) -> list[str]:
        return [*([wc.model] if each else []), *fixed]

    endpoints = {resource_name(config["models"][m]["endpoint"]) for m in fixed}
    resources = ({res: (lambda wc, _res=res: int(_res in endpoints or resource_name(
        config["models"][wc.model]["endpoint"]) == _res)) for res in map(resource_name, config["endpoints"])}
        if each else {res: 1 for res in endpoints})
    cfg = section_hash(section)
    if each:
        model, judge = "{wildcards.model}", fixed[0] if len(fixed) == 1 else None
    else:
        model, judge = (fixed[0] if len(fixed) == 1 else None), None
    shell = command(stage, model=model, judge=judge)
    if not st.calls:
        shell = shell.replace("2> {log}", "2> {log.main}")
    given = {_key(name): value for name, value in open_inputs.items()}  # not as keywords: `prompts` is one
    return {"name": rule, "input": {**inputs(config, stage), **given}, "output": outputs(config, stage),
            "params": {"io": io, "cfg": (lambda wc: cfg + model_hash(config, *used(wc))) if each
                       else cfg + (model_hash(config, *fixed) if fixed else "")},
            "resources": resources, "log": log, "shell": shell}
