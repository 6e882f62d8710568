"""PaSBench's part of `aura export-dataset`: the items the run loaded (``items.jsonl``) as two configs,
``pasbench_text`` (observation logs) and ``pasbench_image`` (1-4 images each, embedded in the Parquet
file), split ``test``; with construction on, the constructed items as split ``constructed`` of the same
config. A config without rows (the image set not loaded) is left out, and the card says why.

Licences per split, from the items' ``source``: upstream items MIT (the Hugging Face card of
Youliang/PaSBench), the project's demo items CC-BY-4.0 (data/raw/pasbench_demo/README.md), constructed
items unknown (no licence is recorded for them).
"""
from __future__ import annotations

from aura.export_dataset import Column, Release, Split, Subset
from aura.export_dataset.inputs import download_pin, read_rows, sidecar

from . import construct_on, layout
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

CITATION = """@misc{pasbench,
  title = {Towards Evaluating Proactive Risk Awareness of Multimodal Language Models},
  author = {Yuan and others},
  note = {PaSBench; data: Hugging Face dataset Youliang/PaSBench}
}"""


def licence(rows: list[dict]) -> str:
    found = {LICENCES.get(r.get("source"), "unknown") for r in rows}
    return found.pop() if len(found) == 1 else "unknown"


def _split(name: str, path: str, rows: list[dict], modality: str) -> Split | None:
    rows = [r for r in rows if r.get("modality") == modality]
    return Split(name, path, rows, licence(rows)) if rows else None


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
              "folder": prov.get("folder"), "files_sha256": prov.get("files"),
              "license": "mit (upstream, per its Hugging Face card); demo items cc-by-4.0; constructed unknown"}
    notes = [n for n in [(prov.get("image_set") or {}).get("note")] if n]
    if not built["image"][0]:
        notes.append("no image item in the items file: config pasbench_image has no test split")
    return Release("pasbench", "PaSBench: proactive risk awareness on text logs and images", tuple(subsets),
                   (CITATION,), (source,), tuple(notes))
