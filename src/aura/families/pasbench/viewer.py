"""PaSBench's part of the run viewer (`python -m aura view`).

Reads `pasbench_items`, `pasbench_responses` and `pasbench_judgments`: one list row per (item, model,
sample) answered, or one per item when no model answered yet; `label` is the judge's verdict (detected /
missed) or why there is none. An item page shows the observation (an image item's images inline, served
from the run's image folders: the data folder's and the image construction's), its risk, and every
sample's answer with its judgement.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from aura.web.viewer.data import RunData, list_frame, checked_rows
from aura.web.viewer.pages import Pages
from aura.web.viewer.part import ViewerPart

from .data import IMAGE_DIRS, PasDataError, data_folder, data_spec

LEGEND = {
    "judged (the judge's verdict on one sample's answer)": {
        "detected": "the answer warns of the item's risk, unasked", "missed": "the answer does not name the risk",
        "(not_applicable)": "not asked: an image item and a model without vision",
        "(unparsed), (failed)": "no verdict: the model's answer could not be read, or its call failed",
        "(judge unparsed), (judge failed)": "no verdict: the judge's answer could not be read, or its call failed"},
    "modality": {"text": "a time-stamped observation log of a person's activity", "image": "1-4 images of a scene"},
}


def pas_label(response: dict, judgement: dict | None) -> str:
    """detected / missed by the judge, else why there is no verdict (the response's or judgement's status)."""
    if response.get("status") != "ok":
        return f"({response.get('status')})"
    if not judgement or judgement.get("status") != "ok":
        return f"(judge {(judgement or {}).get('status', 'missing')})"
    return "detected" if judgement.get("detected") else "missed"


class PaSBenchViewer(ViewerPart):
    title = "PaSBench"
    filters = ("model", "label", "dimension", "domain")  # dimension: modality, domain: severity
    rows_template = "pasbench_rows.html"
    css = ".lab-detected { background: #d6efdc; } .lab-missed { background: #f7dada; }"

    def load(self, data: RunData, layout: dict) -> pd.DataFrame | None:
        self.items: dict[str, dict] = {}
        self.samples: dict[str, list[dict]] = {}  # item_id -> response + judgement rows
        L = layout
        if not data.path(L["pasbench_items"]).is_file():
            return None
        self.items = {r["item_id"]: r for r in checked_rows(data.path(L["pasbench_items"]), "item_id")}
        verdicts = {(j["model"], j["item_id"], j["sample"]): j for _, p in data.files(L["pasbench_judgments"])
                    for j in checked_rows(p, "model", "item_id", "sample", "status")}
        rows = []
        for _, p in data.files(L["pasbench_responses"]):
            for r in checked_rows(p, "model", "item_id", "sample", "status"):
                j = verdicts.get((r["model"], r["item_id"], r["sample"]))
                self.samples.setdefault(r["item_id"], []).append({**r, "judgement": j})
                item = self.items.get(r["item_id"], {})
                rows.append({"key": r["item_id"], "item_id": r["item_id"], "model": r["model"], "sample": r["sample"],
                             "dimension": r.get("modality") or "", "domain": str(item.get("severity") or ""),
                             "label": pas_label(r, j), "answer": r.get("answer") or "",
                             "text": " ".join(str(x) for x in (r["item_id"], item.get("safety_knowledge"), item.get("log"),
                                                                r.get("answer"), (j or {}).get("rationale")) if x).lower()})
        if not rows:  # items only: one row per item
            rows = [{"key": i, "item_id": i, "model": "", "sample": "", "dimension": it.get("modality") or "",
                     "domain": str(it.get("severity") or ""), "label": "", "answer": "",
                     "text": " ".join(str(x) for x in (i, it.get("safety_knowledge"), it.get("log")) if x).lower()}
                    for i, it in self.items.items()]
        return list_frame(rows, ["item_id", "model", "sample"])

    def legend(self) -> dict[str, dict[str, str]]:
        return LEGEND

    def media(self, data: RunData, layout: dict) -> list[Path]:
        """The folders image items' files lie in: pasbench.data.images, else the data folder's images/ and
        combine_images/; and the folder the image construction writes its PNGs to."""
        spec = data_spec(data.raw)
        try:
            folder = Path(data_folder(data.raw))
        except PasDataError:  # no data folder configured: no image of it to show
            folder = None
        found = [Path(spec["images"])] if spec.get("images") else [folder / d for d in IMAGE_DIRS] if folder else []
        return [*found, Path(layout["pasbench_construct_image_drafts"]).parent / "images"]

    def item(self, pages: Pages, key: str) -> str | None:
        if key not in self.items:
            return None
        samples = sorted(self.samples.get(key, []), key=lambda s: (s["model"], s["sample"]))
        return pages.render_part(self, "pasbench_item.html", item=self.items[key], samples=samples)


PART = PaSBenchViewer
