"""What a manifest may leave out because its stages already say it: the layout, the targets, the prompt versions,
the model-name checks (and, in aura.pipeline.rules_support, the rules).

A light family declares its stages (aura.pipeline.stage.Stage), its reports and its config schema; from those:

- **which models run a stage**: each `Call` names a model setting as a dotted config path (``refusal.models``,
  ``refusal.judge``). A path whose schema property is an array makes the stage per model: one job per name
  in the list, the model as the job's ``--model`` (``ctx.model``), ``{model}`` in its outputs' paths. A path to a
  string is one model for every job. An empty setting (no models, no judge) runs no job of the stage.
- **the layout**: each stage output's layout key lies at ``<results>/<family>/<output name>.jsonl``, per model
  ``<results>/<family>/<output name>/{model}.jsonl``;
- **the targets**: every output of a stage that runs (its per-model files expanded), and every report whose inputs
  are all produced (a report's own ``needs`` still decides when it gives one);
- **the prompts**: every prompt a stage declares, in the highest version its file has in the family's prompt
  folder (``<name>.v<N>.md``; a new version of a prompt is a new file, which the family then runs);
- **the model checks**: a schema property with ``"format": "model"`` (a string, or an array of them) must name a
  model under ``models:`` (one line each, as the family's own ``check`` would say it).

A family that gives one of these itself (``layout=``, ``targets=``, ``prompts=``) keeps its own.
"""
from __future__ import annotations

import re
from pathlib import Path

MODEL_FORMAT = "model"  # the JSON-schema "format" of a property naming a model under models:
JOB_FLAGS = ("--model", "--judge")  # a Call's model given by the job's command line (a hand-written rule)


def setting(raw: dict, path: str):
    """The config value at a dotted path (``refusal.models``), None where it is not set."""
    value = raw
    for part in path.split("."):
        if not isinstance(value, dict):
            return None
        value = value.get(part)
    return value


def _property(family, path: str) -> dict:
    """The schema property of a dotted path inside the family's section ({} when the schema does not say)."""
    head, _, rest = path.partition(".")
    node = family.schema if head == family.name else {}
    for part in rest.split(".") if rest else []:
        node = (node.get("properties") or {}).get(part) or {}
    return node


def per_model_path(family, stage) -> str | None:
    """The config path of the list of models a stage runs once each for (its Call on an array setting), or None."""
    for call in stage.calls.values():
        if call.model not in JOB_FLAGS and _property(family, call.model).get("type") == "array":
            return call.model
    return None


def stage_models(family, stage, raw: dict) -> list[str | None]:
    """The jobs of a stage under a config: one per model of its per-model setting ([] when none is set), else
    one job ([None]) when every model setting it calls is set, else none."""
    path = per_model_path(family, stage)
    if path is not None:
        return list(setting(raw, path) or [])
    fixed = [c.model for c in stage.calls.values() if c.model not in JOB_FLAGS]
    return [None] if all(setting(raw, p) for p in fixed) else []


def layout_of(family):
    """The derived layout function of a family: every stage output's key at its derived path (see above)."""
    def layout(raw: dict) -> dict[str, str]:
        base = f"{raw['paths']['results']}/{family.name}"
        out = {}
        for stage in family.stages.values():
            each = per_model_path(family, stage) is not None
            for name, key in stage.outputs.items():
                if key is not None:
                    out[key] = f"{base}/{name}/{{model}}.jsonl" if each else f"{base}/{name}.jsonl"
        return out
    return layout


def produced(family, raw: dict) -> dict[str, list[str]]:
    """layout key -> the files the stages that run under `raw` write (per-model patterns expanded)."""
    lay, out = family.layout(raw), {}
    for stage in family.stages.values():
        models = stage_models(family, stage, raw)
        for key in (k for k in stage.outputs.values() if k is not None):
            out[key] = [lay[key].format(model=m) if m else lay[key] for m in models]
    return {k: v for k, v in out.items() if v}


def report_paths(raw: dict, name: str, spec: dict) -> dict[str, str]:
    """A report's files: its figure (pdf, png) unless ``figure: False``, each table's csv and md (the Snakefile's
    render rule names them so, aura.pipeline.rules_support.report_outputs)."""
    figures, tables = raw["paths"]["figures"], f"{raw['paths']['results']}/tables"
    out = {"pdf": f"{figures}/{name}.pdf", "png": f"{figures}/{name}.png"} if spec.get("figure", True) else {}
    for t in spec.get("tables", []):
        out.update({f"{t}_csv": f"{tables}/{t}.csv", f"{t}_md": f"{tables}/{t}.md"})
    return out


def targets_of(family):
    """The derived targets function: what the stages that run write, and the reports whose inputs they make
    (and whose own ``needs``, when given, holds)."""
    def targets(raw: dict) -> list[str]:
        made = produced(family, raw)
        ready = [(name, spec) for name, spec in family.reports.items()
                 if all(k in made for k in spec["inputs"]) and (spec.get("needs") is None or spec["needs"](raw))]
        return [*(f for files in made.values() for f in files),
                *(f for name, spec in ready for f in report_paths(raw, name, spec).values())]
    return targets


VERSIONED = re.compile(r"^(?P<name>.+)\.v(?P<version>\d+)\.(md|yaml)$")


def prompts_of(family) -> dict[str, tuple[str, int]]:
    """Each prompt a stage declares -> ("", the highest version of its file in the family's prompt folder)."""
    folder = Path(family.prompts_dir)
    found: dict[str, int] = {}
    for path in folder.glob("*.v*.*") if folder.is_dir() else ():
        m = VERSIONED.match(path.name)
        if m:
            found[m["name"]] = max(found.get(m["name"], 0), int(m["version"]))
    declared = {p for stage in family.stages.values() for p in stage.prompts}
    missing = sorted(declared - set(found))
    if missing:
        raise ValueError(f"family '{family.name}': no prompt file {missing[0]}.v<N>.md in {folder}")
    return {name: ("", found[name]) for name in sorted(declared)}


def model_problems(family, raw: dict) -> list[str]:
    """One line per setting of the family's section typed ``"format": "model"`` whose name is not a model."""
    section, models, out = raw.get(family.name) or {}, raw.get("models") or {}, []
    for key, prop in (family.schema.get("properties") or {}).items():
        if key not in section:
            continue
        typed = prop.get("format") == MODEL_FORMAT or (prop.get("items") or {}).get("format") == MODEL_FORMAT
        values = section[key] if isinstance(section[key], list) else [section[key]]
        out += [f"{family.name}.{key}: unknown model '{v}' (not under models:)"
                for v in values if typed and v and v not in models]
    return out
