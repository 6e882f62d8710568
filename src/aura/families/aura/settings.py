"""The AURA family's settings: its config section (`aura:`), its roles, and the checks the schema
cannot make (models named by role, lists that must name evaluated models, the vendor-overlap design)."""
from __future__ import annotations

from aura.config import ConfigError, family_section

# Model lists that must name evaluated models (the roles name any configured model).
EVALUATED_LISTS = ("format_models", "consistency_models", "vendor_overlap_models")


def section(raw: dict) -> dict:
    """The `aura:` section of a raw config."""
    return family_section(raw, "aura")


def roles(raw: dict) -> dict:
    return section(raw).get("roles") or {}


def role_models(config, role: str) -> list[str]:
    """The models of one role (a list role as given, a single one as a list of one)."""
    value = roles(config.raw)[role]
    return list(value) if isinstance(value, list) else [value]


def check(raw: dict) -> list[str]:
    """Problems of the `aura` section the schema cannot see, one line each."""
    if not roles(raw):
        return ["aura.roles: the AURA family needs its roles (generator, reviewers, classifier, judges, evaluated)"]
    problems = []
    for role, value in roles(raw).items():
        for model_name in value if isinstance(value, list) else [value]:
            if model_name not in raw.get("models", {}):
                problems.append(f"role '{role}' names unknown model '{model_name}'")
    for key in EVALUATED_LISTS:
        for model_name in section(raw).get("evaluate", {}).get(key) or []:
            if model_name not in roles(raw)["evaluated"]:
                problems.append(f"aura.evaluate.{key}: '{model_name}' is not an evaluated model")
    if problems:
        return problems
    try:
        vendor_overlaps(raw)
    except ValueError as exc:
        return [str(exc)]
    return []


def check_case_study_seed(raw: dict, selected, known=None, source: str = "aura.stats.case_study_seed") -> None:
    """The configured Table 34 seed must be one the run selected (null: chosen later). `known`: every
    seed id the source holds, to tell a wrong id from one left out by aura.construct.max_seeds."""
    wanted = section(raw).get("stats", {}).get("case_study_seed")
    if wanted is None or wanted in set(selected):
        return
    if known is not None and wanted in set(known):
        raise ConfigError(f"{source}: '{wanted}' is not among the {len(list(selected))} seeds selected "
                          f"(aura.construct.max_seeds); raise the cap or set aura.stats.case_study_seed: null")
    raise ConfigError(f"{source}: '{wanted}' is not a seed id of the source (ids look like "
                      f"'<Domain>/<file stem>/<id>'; null picks one)")


def vendor_overlaps(raw: dict) -> dict[str, list[str]]:
    """Evaluated model -> the panel judges that share its vendor (Table 24; {} = no analysis).

    Only models with a vendor and a same-vendor judge appear. Without a replacement judge there is
    no analysis. A replacement judge of the model's own vendor would defeat the purpose: an error.
    """
    roles, models = section(raw)["roles"], raw["models"]
    repl = roles.get("replacement_judge")
    if not repl:
        return {}
    repl_vendor = models[repl].get("vendor")
    chosen = section(raw).get("evaluate", {}).get("vendor_overlap_models")
    out = {}
    for model in chosen if chosen is not None else roles["evaluated"]:
        if model not in roles["evaluated"]:
            raise ValueError(f"aura.evaluate.vendor_overlap_models: '{model}' is not an evaluated model")
        vendor = models[model].get("vendor")
        same = [j for j in dict.fromkeys(roles["judges"]) if vendor and models[j].get("vendor") == vendor]
        if not same:
            if chosen is not None:
                raise ValueError(f"aura.evaluate.vendor_overlap_models: '{model}' shares no vendor with a panel judge")
            continue
        if repl_vendor == vendor:
            raise ValueError(f"replacement judge '{repl}' has the same vendor '{vendor}' as evaluated model '{model}'")
        out[model] = same
    return out
