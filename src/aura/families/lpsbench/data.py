"""Stages ``lpsbench-fetch`` and ``lpsbench-cases``: where the cases come from, which of them run.

The cases are a folder of ``<domain>/<RISK>_<n>.json`` files (:mod:`.cases`): the configured
``lpsbench.cases.path`` (the demo set ``data/raw/lpsbench_demo`` by default), or the ``dest`` of a pinned
download of the upstream repository (``lpsbench.cases.download {url, subdir, dest, lock}``, checksum
recorded in ``lock`` by :func:`aura.fetch.fetch_archive`, as PaSBench's fetch does), or, with
``lpsbench.cases.generated: true``, the folder of generated cases the review stage kept (layout key
``lpsbench_generated_cases``; case generation must be enabled): the workflow then chains generation ->
review -> cases -> episodes with no path to repoint. ``--in cases_dir=<folder>`` overrides them all.

``lpsbench.max_cases`` (null = all) takes a spread over the risk categories: risks are visited benign
and adversarial in turn (a, e, b, f, c, g, d, h, i), one case of each per round (lowest domain, then
number first), until N are taken. So N=2 gives one benign and one adversarial case. Deterministic, no draw.

A row of ``cases.jsonl`` is an :class:`~.cases.LpsCase` (``case_id, domain, risk, number, body``) plus
``benign`` (bool), ``risk_letter`` (the paper's a-i) and ``kind`` (benign | adversarial).
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from aura.config import UserError
from aura.io import sha256_text

from .cases import RISKS, LpsCase, load_cases
from .settings import section  # noqa: F401 - the family's modules take it here too

# a, e, b, f, c, g, d, h, i: benign and adversarial risks in turn
BENIGN = [c for c, r in RISKS.items() if r.kind == "benign"]
ADVERSARIAL = [c for c, r in RISKS.items() if r.kind == "adversarial"]
SPREAD_ORDER = [c for pair in zip(BENIGN + [None], ADVERSARIAL) for c in pair if c is not None]


class LpsDataError(UserError):
    """A case source or setting that cannot be used (one line)."""


def download_spec(raw: dict[str, Any]) -> dict[str, Any] | None:
    """``lpsbench.cases.download`` when configured and enabled, else None."""
    spec = (section(raw).get("cases") or {}).get("download")
    return spec if spec and spec.get("enabled", True) else None


def from_generated(raw: dict[str, Any]) -> bool:
    """Whether the cases are the generated ones (``lpsbench.cases.generated``)."""
    return bool((section(raw).get("cases") or {}).get("generated"))


def cases_folder(raw: dict[str, Any]) -> str:
    """The generated cases' folder (``cases.generated``), the download's ``dest`` when a download is enabled,
    else ``lpsbench.cases.path``."""
    if from_generated(raw):
        from .paths import layout

        return layout(raw)["lpsbench_generated_cases"]
    spec = download_spec(raw)
    if spec:
        return str(Path(spec["dest"]) / spec["cases"]) if spec.get("cases") else spec["dest"]
    path = (section(raw).get("cases") or {}).get("path")
    if not path:
        raise LpsDataError("lpsbench.cases: give a folder (path) or a pinned download {url, subdir, dest, lock}")
    return path


def checkout(raw: dict[str, Any]) -> str | None:
    """The upstream checkout whose ``tools/`` serve the cases: the generated cases' folder for generated cases with
    mock-tool modules (``generate.toolkit: module``; the review writes them to its ``tools/``), else
    ``lpsbench.tools.upstream_dir``, else the download's ``dest`` (the whole repository) when a download is
    enabled, else None."""
    if from_generated(raw) and ((section(raw).get("generate") or {}).get("toolkit") or "module") == "module":
        from .paths import layout  # generated cases with their modules: the review's folder is the checkout

        return layout(raw)["lpsbench_generated_cases"]
    given = (section(raw).get("tools") or {}).get("upstream_dir")
    if given:
        return given
    spec = download_spec(raw)
    return spec["dest"] if spec and not from_generated(raw) else None


def _by_domain(cases: list[LpsCase]) -> list[LpsCase]:
    """Cases (one risk's, in file order) interleaved round-robin over their domains in order of first appearance,
    so a cap takes every domain before a second case of any: the first case stays the first."""
    queues: dict[str, list[LpsCase]] = {}
    for c in cases:
        queues.setdefault(c.domain, []).append(c)
    out: list[LpsCase] = []
    while any(queues.values()):
        out += [q.pop(0) for q in queues.values() if q]
    return out


def spread(cases: list[LpsCase], max_cases: int | None) -> list[LpsCase]:
    """The first `max_cases` cases of a round-robin over risks in SPREAD_ORDER, each risk's cases taken
    round-robin over its domains (a stratified spread: a cap keeps every risk and, as far as it reaches, every
    domain; Table 4's average is over the domains); null = all, file order. The result keeps file order."""
    if max_cases is None:
        return list(cases)
    if type(max_cases) is not int or max_cases < 1:
        raise LpsDataError(f"lpsbench.max_cases: expected a positive integer or null, got {max_cases!r}")
    queues = {code: _by_domain([c for c in cases if c.risk == code]) for code in SPREAD_ORDER}  # cases come sorted
    taken: list[LpsCase] = []
    while len(taken) < max_cases and any(queues.values()):
        for code in SPREAD_ORDER:
            if queues[code] and len(taken) < max_cases:
                taken.append(queues[code].pop(0))
    order = {c.case_id: i for i, c in enumerate(cases)}
    return sorted(taken, key=lambda c: order[c.case_id])


def case_row(case: LpsCase) -> dict:
    risk = case.risk_info
    return {**case.model_dump(mode="json", by_alias=True), "benign": risk.kind == "benign",
            "risk_letter": risk.letter, "kind": risk.kind}


def row_case(row: dict) -> LpsCase:
    """The case of a cases.jsonl row (the extra columns dropped)."""
    return LpsCase.model_validate({k: row[k] for k in ("case_id", "domain", "risk", "number", "body")})


def _check_count(folder: Path, count: int | None, cases: str | None = None) -> None:
    """A fetched folder must load as cases (in its `cases` subfolder when given) and, when the config gives
    it, hold `count` of them."""
    found = len(load_cases(folder / cases if cases else folder))
    if count is not None and found != count:
        raise ValueError(f"{folder}: expected {count} case files (lpsbench.cases.download.count), found {found}")


def run_fetch(ctx) -> None:
    """Stage ``lpsbench-fetch``: download ``lpsbench.cases.download.url`` into its dest (checksum pinned in
    its lock file); the unpacked folder must load as cases before it is installed."""
    from aura.fetch import FetchError, fetch_archive

    spec = download_spec(ctx.config.raw)
    if not spec:
        raise LpsDataError("lpsbench-fetch: the config has no enabled lpsbench.cases.download section")
    try:
        fetch_archive(spec["url"], Path(spec["dest"]), Path(spec["lock"]), spec.get("subdir"),
                      check=lambda d: _check_count(d, spec.get("count"), spec.get("cases")))
    except (ValueError, FetchError) as exc:  # checksum, unreadable or unsafe archive, a bad case file
        raise LpsDataError(f"lpsbench-fetch: {exc}") from None


def broken(cases: list[LpsCase], root: str | None) -> dict[str, str]:
    """case_id -> why its tools cannot be served, for the cases that bring no tool_specs of their own: their
    module in the checkout `root` is read with ``ast`` (never imported): a syntax error, a tool the case
    lists but the module lacks, or no module at all. Empty when there is no checkout (the episodes stage
    then refuses such cases in one line)."""
    if root is None:
        return {}
    from .module_source import case_tools

    out = {}
    for case in cases:
        if case.body.tool_specs is None:
            problem = case_tools(root, case).problem
            if problem:
                out[case.case_id] = f"upstream tool module {case.body.mcp.file}: {problem}"
    return out


def run_cases(ctx) -> None:
    """Stage ``lpsbench-cases``: load the folder (``--in cases_dir`` or the config), drop the cases whose
    upstream module is broken (``--out excluded``: one row per case with its reason; the tables state them),
    keep the spread of ``lpsbench.max_cases``, write ``--out cases`` with each file's sha256 in the
    provenance. ``--in checkout`` overrides the configured checkout."""
    raw = ctx.config.raw
    folder = Path(ctx.inputs["cases_dir"] if "cases_dir" in ctx.inputs else cases_folder(raw))
    cases = load_cases(folder)  # a bad file: CaseError, one line naming it, nothing written
    root = str(ctx.inputs["checkout"]) if "checkout" in ctx.inputs else checkout(raw)
    why = broken(cases, root)
    excluded = [{"case_id": c.case_id, "domain": c.domain, "risk": c.risk, "reason": why[c.case_id]}
                for c in cases if c.case_id in why]
    for row in excluded:
        print(f"lpsbench-cases: excluded {row['case_id']}: {row['reason']}", file=sys.stderr)
    chosen = spread([c for c in cases if c.case_id not in why], section(raw).get("max_cases"))
    files = {f"{c.domain}/{c.risk}_{c.number}.json":
             sha256_text((folder / c.domain / f"{c.risk}_{c.number}.json").read_text(encoding="utf-8"))
             for c in chosen}
    if "excluded" in ctx.outputs:
        ctx.write("excluded", excluded, loaded=len(cases), checkout=root)
    ctx.write("cases", [case_row(c) for c in chosen], folder=str(folder), files=files, loaded=len(cases),
              excluded=len(excluded), checkout=root)


def texts_root(raw: dict) -> str | None:
    """The checkout whose texts the agent and the evaluator use (``lpsbench.texts: upstream``, cases not generated),
    else None (our own prompts)."""
    if (section(raw).get("texts") or "own") != "upstream" or from_generated(raw):
        return None
    root = checkout(raw)
    if root is None:
        raise LpsDataError("lpsbench.texts: upstream needs an LPS-Bench checkout (tools.upstream_dir or cases.download)")
    return root
