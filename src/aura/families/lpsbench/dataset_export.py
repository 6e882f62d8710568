"""LPS-Bench's part of `aura export-dataset`: the cases the run loaded (``cases.jsonl``) as config
``lpsbench``, split ``test``; with case generation on (and the run not already reading the generated
cases), the kept generated cases as split ``generated``.

Licences: upstream's cases MIT (its repository's LICENSE); the project's demo cases MIT too (written for this
project, under its LICENSE; told apart by aura.export_dataset.inputs.is_demo, from a checkout or a wheel);
generated cases and any other folder record none, so "unknown". The cases the run excluded (a broken upstream
tool module) are named in the card.
The card's text and the citation are in card_text. The rows are a demo, not the benchmark, when the run read
the family's demo cases or an embedded model generated cases (the reproduction stage's demo_reason).
"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from aura.export_dataset import Column, Release, Split, Subset
from aura.export_dataset.inputs import download_pin, is_demo, read_rows, sidecar
from aura.export_dataset.public_paths import public_path

from . import cases_dir, generate_on, layout
from .card_text import CARD, CITATION
from .data import case_row, download_spec, from_generated

COLUMNS = (
    Column("case_id", "string", "`<domain>-<RISK>_<n>`, from the case file's path"),
    Column("domain", "string", "task domain: OS_operation, code, fileio, multi_media, office, social_media, "
                               "webbrowser"),
    Column("risk", "string", "risk code: TS, OC, FA, IP (benign), HS, MT, EB, RC, PI (adversarial)"),
    Column("risk_letter", "string", "the paper's risk letter a-i"),
    Column("kind", "string", "benign or adversarial"),
    Column("benign", "bool", "kind is benign"),
    Column("number", "int64", "n of the case file `<RISK>_<n>.json`"),
    Column("instruction", "string", "the user's task, as the agent receives it"),
    Column("criterion", "string", "the safety criterion the evaluator applies to the episode"),
    Column("tools", "list[string]", "names of the case's MCP tools"),
    Column("tool_specs_json", "json", "per tool {name, description, parameters (JSON schema), behaviour (for an "
                                      "emulated environment only)}; null for upstream cases (names only)"),
    Column("case_json", "json", "the whole case file (upstream keys: instruction, evaluator, MCP, tool_specs)"),
)


def flat(row: dict) -> dict:
    """A cases.jsonl row as the export's columns."""
    body = row.get("body")
    if not isinstance(body, dict):
        return row  # the missing columns are named by the export
    return {**{k: row.get(k) for k in ("case_id", "domain", "risk", "risk_letter", "kind", "benign", "number")},
            "instruction": body.get("instruction"), "criterion": (body.get("evaluator") or {}).get("criterion"),
            "tools": (body.get("MCP") or {}).get("tools"), "tool_specs_json": body.get("tool_specs"),
            "case_json": body}


def export(config) -> Release:
    from aura.stats.reproduction import demo_reason

    from . import FAMILY
    from .cases import load_cases

    raw = config.raw
    L = layout(raw)
    rows = read_rows(L["lpsbench_cases"], "LPS-Bench cases file")
    prov = sidecar(L["lpsbench_cases"])
    spec = download_spec(raw)
    folder = prov.get("folder")
    own = is_demo(folder, FAMILY)
    if own:
        test_licence, stated = "mit", "mit (written for this project, under its LICENSE)"
    elif spec and not from_generated(raw):
        test_licence, stated = "mit", "mit (upstream LICENSE)"
    else:
        test_licence, stated = "unknown", "unknown"
    splits = [Split("test", L["lpsbench_cases"], [flat(r) for r in rows], test_licence)]
    if generate_on(raw) and not from_generated(raw):
        generated = L["lpsbench_generated_cases"]
        splits.append(Split("generated", generated, [flat(case_row(c)) for c in load_cases(generated)],
                            "unknown"))
    subset = Subset("lpsbench", "LPS-Bench: long-horizon tasks for tool-using (MCP) agents, each with a benign or "
                    "adversarial planning-time risk and the criterion an evaluator judges the episode by.",
                    COLUMNS, tuple(splits), (L["lpsbench_generate_drafts"], L["lpsbench_generate_reviews"]))
    files = prov.get("files") or {}
    where = public_path(L["lpsbench_cases"], config)
    name = ("LPS-Bench demo cases (written for this project, upstream's layout; not upstream's cases)" if own
            else "LPS-Bench cases (github.com/tychenn/LPS-Bench examples/)" if spec else "LPS-Bench-layout case folder")
    source = {"name": name, **download_pin(spec), "folder": public_path(folder, config),
              "files": f"{len(files)} case files, sha256 of each in {where}.prov.json" if files else None,
              "license": stated}
    notes = []
    excluded = Path(L["lpsbench_excluded"])
    if excluded.is_file():
        gone = read_rows(excluded, "LPS-Bench excluded cases")
        if gone:
            notes.append(f"{len(gone)} case(s) excluded, their upstream tool module is broken: "
                         + ", ".join(str(g.get("case_id")) for g in gone))
    generator = (config.section("lpsbench").get("generate") or {}).get("generator")
    demo = demo_reason(config, FAMILY, data=[folder or cases_dir(raw)], models=[generator] if generate_on(raw) else [])
    return Release("lpsbench", "LPS-Bench: planning-time safety of tool-using agents", (subset,), (CITATION,),
                   (source,), tuple(notes), card=replace(CARD, source_datasets=("original",)) if own else CARD,
                   demo=demo)
