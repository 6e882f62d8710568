"""PaSBench's part of `aura export-dataset`: the items the run loaded (``items.jsonl``) as two configs,
``pasbench_text`` (observation logs) and ``pasbench_image`` (1-4 images each, embedded in the Parquet
file), split ``test``; with construction on, the constructed items as split ``constructed`` of the same
config. A config without rows (the image set not loaded) is left out, and the card says why.

Licences per split, from the items' ``source``: upstream items MIT (the Hugging Face card of
Youliang/PaSBench), the project's demo items CC-BY-4.0 (data/raw/pasbench_demo/README.md), constructed
items unknown (no licence is recorded for them). The card's text and the citation are in card_text. The rows
are a demo, not the benchmark, when the run read the family's demo items or an embedded model constructed
items (the reproduction stage's demo_reason).
"""
from __future__ import annotations

from dataclasses import replace

from aura.export_dataset import Column, Release, Split, Subset
from aura.export_dataset.inputs import download_pin, read_rows, sidecar
from aura.export_dataset.public_paths import public_path

from . import construct_on, layout
from .card_text import CARD, CITATION
from .data import download_spec

COMMON = (
    Column("item_id", "string", "`text-NNNN` / `image-NNNN` (constructed items from 9001)"),
    Column("index", "int64", "the record's index in upstream's file (constructed: 9000 + knowledge point)"),
    Column("safety_knowledge", "string", "the safety knowledge the item tests"),
    Column("condition", "string", "the condition or scenario in which the risk arises"),
    Column("risk_reason", "string", "why the observed behaviour is risky (the reference the judge compares to)"),
    Column("trigger", "string", "the risk-triggering behaviour"),
)
TAIL = (
    Column("severity", "string", "critical, warning or info; null when unknown"),
    Column("source", "string", "upstream, demo or constructed"),
)
TEXT_COLUMNS = (*COMMON,
                Column("log", "string", "the time-stamped observation log the model reads ([LOG START] ... [LOG END])"),
                Column("words", "int64", "whitespace-separated words of the log"), *TAIL)
IMAGE_COLUMNS = (*COMMON,
                 Column("images", "list[image]", "the item's image files (split sub-images, or one composite)"),
                 Column("n_images", "int64", "the item's number of sub-images (1-4)"), *TAIL)
LICENCES = {"upstream": "mit", "demo": "cc-by-4.0"}

def licence(rows: list[dict]) -> str:
    found = {LICENCES.get(r.get("source"), "unknown") for r in rows}
    return found.pop() if len(found) == 1 else "unknown"


def _split(name: str, path: str, rows: list[dict], modality: str) -> Split | None:
    rows = [r for r in rows if r.get("modality") == modality]
    return Split(name, path, rows, licence(rows)) if rows else None


def demo(config, items: list[dict]) -> str | None:
    """Why the rows are not the benchmark (demo items read, or an embedded model constructing), or None."""
    from aura.stats.reproduction import demo_reason

    from . import FAMILY

    pb = config.section("pasbench")
    c = pb.get("construct") or {}
    models = [c.get("generator"), c.get("reviewer")] if construct_on(config.raw) else []
    reason = demo_reason(config, FAMILY, data=[(pb.get("data") or {}).get("path")], models=models)
    if reason is None and any(i.get("source") == "demo" for i in items):
        reason = "demo data: the items file holds demo items"
    return reason


def export(config) -> Release:
    raw = config.raw
    L = layout(raw)
    items = read_rows(L["pasbench_items"], "PaSBench items file")
    prov = sidecar(L["pasbench_items"])
    built = {"text": [], "image": []}
    for modality in built:
        built[modality].append(_split("test", L["pasbench_items"], items, modality))
    constructed = {"text": "pasbench_constructed_text", "image": "pasbench_constructed_images"}
    for modality, key in constructed.items():
        if construct_on(raw, "text" if modality == "text" else "images"):
            built[modality].append(_split("constructed", L[key], read_rows(L[key], f"constructed {modality} items"),
                                          modality))
    trail = {"text": ("pasbench_construct_text_drafts", "pasbench_construct_text_reviews",
                      "pasbench_construct_text_exclusions"),
             "image": ("pasbench_construct_image_drafts", "pasbench_construct_image_exclusions")}
    descriptions = {
        "text": "PaSBench text set: a time-stamped observation log of a person's day that ends before an incident; "
                "a proactive model should warn, unasked, of the risk (`risk_reason`).",
        "image": "PaSBench image set: 1-4 images of a scene before an incident; a proactive model should warn, "
                 "unasked, of the risk (`risk_reason`)."}
    subsets = []
    for modality, columns in (("text", TEXT_COLUMNS), ("image", IMAGE_COLUMNS)):
        splits = tuple(s for s in built[modality] if s is not None)
        if splits:
            subsets.append(Subset(f"pasbench_{modality}", descriptions[modality], columns, splits,
                                  tuple(L[k] for k in trail[modality])))
    source = {"name": "PaSBench (Hugging Face Youliang/PaSBench)", **download_pin(download_spec(raw)),
              "folder": public_path(prov.get("folder"), config), "files_sha256": prov.get("files"),
              "license": "mit (upstream, per its Hugging Face card); demo items cc-by-4.0; constructed unknown"}
    notes = [n for n in [(prov.get("image_set") or {}).get("note")] if n]
    if not built["image"][0]:
        notes.append("no image item in the items file: config pasbench_image has no test split")
    own = all(i.get("source") == "demo" for i in items)
    return Release("pasbench", "PaSBench: proactive risk awareness on text logs and images", tuple(subsets),
                   (CITATION,), (source,), tuple(notes),
                   card=replace(CARD, source_datasets=("original",)) if own and items else CARD,
                   demo=demo(config, items))
