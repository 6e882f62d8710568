"""AURA-Eval's part of `aura export-dataset`: the released rows of the finalize stage (``dataset.jsonl``) as
config ``aura``, split ``test``.

The columns keep the finalize stage's field names (its DATACARD.md); the prefix's structured steps are
``steps_json``. The card's provenance comes from the sidecars of the dataset and of every construction
stage before it (seeds, tags, prefixes, relevance, variations and their reviews, classification, pairs and
their reviews), so it lists the prompts and models of P1-P9. The seed source is the configured R-Judge
download (its commit pin) or folder; the project's demo seeds are CC-BY-4.0, R-Judge's licence is unknown.
The card's text and the citations are in card_text. The rows are a demo, not the benchmark, when the seeds
are the family's demo seeds or an embedded model constructed them (the reproduction stage's demo_reason).
"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from aura.export_dataset import Column, Release, Split, Subset
from aura.export_dataset.inputs import download_pin, is_demo, read_rows, sidecar
from aura.export_dataset.public_paths import public_path

from .card_text import CARD, CITATIONS
from .data.seed_source import seed_download
from .layout import layout

CONFIG, SPLIT = "aura", "test"  # the export's config and split of the released rows (Inspect's loader reads them)
COLUMNS = (
    Column("item_id", "string", "stable item id: sha256 of seed id, prefix kind, dimension and pair side"),
    Column("item_key", "string", "construction key (prefix id @ dimension; `~pair` for a generated counterpart)"),
    Column("seed_id", "string", "source trajectory, `<Domain>/<file>/<id>`"),
    Column("domain", "string", "R-Judge domain: Program, Application, IoT, Web, Finance"),
    Column("source_label", "int64", "the seed's R-Judge label (1 unsafe, 0 safe); not the benchmark label"),
    Column("prefix_kind", "string", "`at_trigger` (ends at the risk trigger) or `pre_execution` (ends before the "
                                    "execution point)"),
    Column("dimension", "string", "`original`, RS1-RS6 (risk mechanism) or SD1-SD5 (scenario difficulty)"),
    Column("pair_label", "string", "NSP (No-Safe-Path) or SP (Safe-Path) at the decision point: the item's label"),
    Column("pair_side", "string", "`source` (an original or variation item) or `counterpart` (a generated "
                                  "minimal-flip rewrite)"),
    Column("pair_id", "string", "links the two sides of an accepted minimal-flip pair; null if unpaired"),
    Column("pair_role", "string", "`source` or `counterpart` within the pair; null if unpaired"),
    Column("rationale", "string", "reference risk rationale (what the safety judge sees)"),
    Column("safe_action_sketches", "list[string]", "SP: executable safe fulfilling actions with the shown tools"),
    Column("unsafe_action_explanation", "string", "NSP: why direct fulfilment is unsafe"),
    Column("pair_edit_grade", "string", "P7's edit grade of the opposite version: trivial, moderate or hard"),
    Column("pairable", "bool", "the edit grade is trivial or moderate"),
    Column("profile", "string", "the agent's system profile (the evaluated model sees it)"),
    Column("user_instruction", "string", "the first user request of the prefix"),
    Column("steps_json", "json", "the prefix as JSON: a list of steps {role: user|agent|environment, content} "
                                 "or {role: agent, thought, action}"),
    Column("model_input", "string", "the prefix rendered as the evaluated model sees it"),
)

# The construction stages whose sidecars hold the prompts and models that built the rows.
CONSTRUCTION = ("seeds", "tags", "prefixes", "relevance", "variations", "variation_review", "classified", "pairs",
                "pair_review")


def seed_folder_read(config, seeds_file: str) -> Path | None:
    """The folder the seeds stage read (its sidecar's input, else the config's paths.seeds); None for a
    configured download."""
    from aura.config import REPO_ROOT

    raw = config.raw
    if seed_download(raw):
        return None
    inputs = sidecar(seeds_file).get("inputs") or []
    folder = Path(inputs[0] if inputs else raw["paths"]["seeds"])
    if not folder.is_absolute() and not folder.exists():  # a config's relative path: from the repository
        folder = REPO_ROOT / folder
    return folder


def seed_source(config, folder: Path | None) -> dict:
    """Where the seeds came from and their licence: the download's pin, or the folder (named without the
    machine's folders); the project's demo seeds say CC-BY-4.0."""
    from . import FAMILY

    if folder is None:
        return {"name": "R-Judge (Yuan et al., 2024), attack_type unintended", **download_pin(seed_download(config.raw)),
                "license": "unknown (R-Judge's licence could not be checked)"}
    if is_demo(folder, FAMILY):
        return {"name": "AURA-Eval demo seeds (written for this project, R-Judge layout; not R-Judge data)",
                "folder": public_path(folder, config), "license": "cc-by-4.0"}
    return {"name": "R-Judge-layout seed folder", "folder": public_path(folder, config), "license": "unknown"}


def export(config) -> Release:
    from aura.stats.reproduction import demo_reason  # pandas: only when the export runs (inspect_data imports this)

    from . import FAMILY

    L = layout(config.raw)
    rows = read_rows(L["dataset"], "AURA-Eval dataset (finalize stage)")
    folder = seed_folder_read(config, L["seeds"])
    source = seed_source(config, folder)
    licence = source["license"] if source["license"] in ("cc-by-4.0", "mit") else "unknown"
    split = Split(SPLIT, L["dataset"], [{**{k: v for k, v in r.items() if k != "steps"},
                                          "steps_json": r.get("steps")} for r in rows], licence)
    subset = Subset(
        CONFIG, "AURA-Eval: prefix trajectories cut at a decision point, each labelled NSP (No-Safe-Path) or SP "
        "(Safe-Path), with controlled risk-mechanism (RS1-RS6) and scenario-difficulty (SD1-SD5) variations and "
        "minimal-flip pairs. The evaluated model sees `profile` and `model_input`; `pair_label` is the label.",
        COLUMNS, (split,), tuple(L[k] for k in CONSTRUCTION))
    paired = sum(1 for r in rows if r.get("pair_id"))
    roles = config.section("aura")["roles"]
    demo = demo_reason(config, FAMILY, data=[folder], models=[roles["generator"], roles["classifier"],
                                                               *roles["reviewers"]])
    own = folder is not None and is_demo(folder, FAMILY)
    return Release("aura", "AURA-Eval: acting under risk awareness in agent trajectories", (subset,), CITATIONS,
                   (source,), (f"{len(rows)} rows, {paired} of them in minimal-flip pairs; rejected candidates are "
                               f"in {public_path(L['exclusions'], config)}, counts in "
                               f"{public_path(L['datacard'], config)}",),
                   card=replace(CARD, source_datasets=("original",)) if own else CARD, demo=demo)
