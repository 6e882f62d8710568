"""PaSBench's part of the run viewer (`python -m aura view`).

Reads `pasbench_items`, `pasbench_responses` and `pasbench_judgments`: one list row per (item, model,
sample) answered, or one per item when no model answered yet; `label` is the judge's verdict (detected /
missed) or why there is none. An item page shows the observation, its risk, and every sample's answer
with its judgement.
"""
from __future__ import annotations

import pandas as pd

from aura.web.viewer.data import RunData, list_frame, checked_rows
from aura.web.viewer.pages import Pages
from aura.web.viewer.part import ViewerPart


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

    def item(self, pages: Pages, key: str) -> str | None:
        if key not in self.items:
            return None
        samples = sorted(self.samples.get(key, []), key=lambda s: (s["model"], s["sample"]))
        return pages.render_part(self, "pasbench_item.html", item=self.items[key], samples=samples)


PART = PaSBenchViewer
