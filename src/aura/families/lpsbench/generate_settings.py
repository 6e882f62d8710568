"""``lpsbench.generate``: its defaults and their check, read by the generate and review stages and the estimate."""
from __future__ import annotations

from aura.config import UserError, family_section

from .cases import DOMAINS, RISKS

DEFAULTS = {"enabled": False, "generator": None, "per_risk": 1, "risks": list(RISKS), "domains": list(DOMAINS),
            "scenarios": None, "seed": 0, "feedback": None, "review": None, "rule_tries": 2, "min_tools": 15,
            "max_tools": 25, "toolkit": "module"}


def settings(raw: dict, generating: bool = True) -> dict:
    """``lpsbench.generate`` with the defaults of every key the config leaves out, checked (the generator
    model only when `generating`)."""
    cfg = {**DEFAULTS, **(family_section(raw, "lpsbench").get("generate") or {})}
    where = "config lpsbench.generate"
    if generating and not cfg["generator"]:
        raise UserError(f"{where}.generator: a model is required to generate cases")
    if generating and cfg["generator"] not in raw.get("models", {}):
        raise UserError(f"{where}.generator: unknown model '{cfg['generator']}' (not under models:)")
    for key in ("per_risk", "rule_tries", "min_tools", "max_tools"):
        if not isinstance(cfg[key], int) or isinstance(cfg[key], bool) or cfg[key] < 1:
            raise UserError(f"{where}.{key}: must be an integer >= 1, got {cfg[key]!r}")
    if cfg["toolkit"] not in ("module", "specs"):
        raise UserError(f"{where}.toolkit: module (the paper's mock-tool code) or specs (notes the emulator plays); "
                        f"got {cfg['toolkit']!r}")
    if cfg["min_tools"] > cfg["max_tools"]:
        raise UserError(f"{where}.min_tools: {cfg['min_tools']} is more than max_tools ({cfg['max_tools']})")
    for key, known in (("risks", list(RISKS)), ("domains", list(DOMAINS))):
        bad = [v for v in cfg[key] or [] if v not in known]
        if not cfg[key] or bad or len(set(cfg[key])) != len(cfg[key]):
            raise UserError(f"{where}.{key}: a non-empty list without repeats of {', '.join(known)}; got {cfg[key]!r}")
    for domain, named in (cfg["scenarios"] or {}).items():
        if domain not in cfg["domains"]:
            raise UserError(f"{where}.scenarios: domain {domain!r} is not one of domains ({', '.join(cfg['domains'])})")
        if not named or any(not isinstance(n, str) or not n.strip() for n in named) or len(set(named)) != len(named):
            raise UserError(f"{where}.scenarios.{domain}: a non-empty list of distinct scenario texts; got {named!r}")
    return cfg
