"""AURA-Eval's part of the run viewer (`python -m aura view`).

Reads `dataset` (items), `seeds` (what a variation is diffed against), `rollouts`, `judgments` (each
judge's three labels), `panel` (the vote per axis) and `table33_overall` (the tables page). One list row
per (item, model) with a panel row, plus one row without a model per item no model was run on; filters
on the panel's label and the judges' agreement read the picked axis (safety unless given).
An item page shows the prefix, the variation's diff against its source (none for an item equal to its
source: an original is shown once), the pair partner and, per model, the rollout and every judge's label
on every axis. The legend explains the judges' scales D0-D3 and A0-A5 and the safety labels in the words
of the judge prompts the family uses (each code's line, up to its first sentence's end), and the pair
labels, dimensions (their names in the construction's dimension definitions), agreement strata and
missing labels.
"""
from __future__ import annotations

import csv
import difflib
import html
import re

import pandas as pd

from aura.prompts import get_prompt
from aura.web.viewer.data import RunData, list_frame, checked_rows
from aura.web.viewer.pages import Pages
from aura.web.viewer.part import ViewerPart

from .dimensions import dimension_specs
from .data.trajectory import render_steps
from .evaluate.schemas import AXES, LABELS
from .stats.human_validation import consensus

AXIS_HEADINGS = {"detection": "detection: how far the agent's thought shows the risk (D0-D3, judged on the thought)",
                 "action_type": "action type: the agent's action's strategy (A0-A5, judged on the action)",
                 "safety": "safety: the action against the item's reference risk"}
PAIR_LABELS = {"NSP": "No-Safe-Path: doing what was asked causes the risk; acting safely means intervening",
               "SP": "Safe-Path: the request can be carried out safely; refusing it is over-refusal"}
VOTES = {
    "agreement of the judges (on the axis shown)": {
        "unanimous": "every judge gave the same label", "majority": "most judges agreed, not all",
        "tied": "no label has a majority (the panel's label is unresolved)", "none": "no vote (the rollout was not judged)"},
    "no label": {"unresolved": "no strict majority of the panel: left out of the rates",
                 "unparsed": "the judge's answer held no valid label",
                 "rollout_unparsed": "the model's answer had no thought/action to judge (rollout_failed: no answer)",
                 "not_judged": "the axis was not judged (detection of an action-only rollout)",
                 "excluded": "the rows without a valid label on the axis: what a rate's denominator leaves out"},
}


def scale(prompt: str, labels: list[str]) -> dict[str, str]:
    """Each label's meaning from a judge prompt's list ('- D1 perception: the reasoning notices ...'): its
    name and definition up to the first sentence's end, '' when the prompt has no line for it."""
    text = get_prompt(prompt).system
    out = {}
    for label in labels:
        m = re.search(rf"^- {re.escape(label)}(?: ([^:\n]+))?: (.+)$", text, re.M)
        first = re.split(r"(?<=[.])\s", m[2])[0].rstrip(".") if m else ""
        out[label] = f"{m[1]}: {first}" if m and m[1] else first
    return out


class AuraViewer(ViewerPart):
    title = "AURA-Eval"
    filters = ("model", "pair_label", "label", "agreement", "dimension", "domain")
    axes = LABELS
    default_axis = "safety"
    rows_template = "aura_rows.html"
    tables_note = "Table 33's unsafe / safe counts per model"
    css = ".lab-unsafe, .lab-nsp { background: #f7dada; } .lab-safe, .lab-sp { background: #d6efdc; }"

    def load(self, data: RunData, layout: dict) -> pd.DataFrame | None:
        self.items: dict[str, dict] = {}
        self.seeds: dict[str, dict] = {}
        self.rollouts: dict[tuple[str, str], dict] = {}
        self.judgments: dict[tuple[str, str], list[dict]] = {}
        self.panel: dict[tuple[str, str], dict] = {}
        self.models_of: dict[str, set] = {}  # item_id -> models with a rollout or a panel row
        self.by_pair: dict[str, list[str]] = {}  # pair_id -> its item ids
        self.table33: list[dict] = []
        L = layout
        if not data.path(L["dataset"]).is_file():
            return None
        self.items = {r["item_id"]: r for r in checked_rows(data.path(L["dataset"]), "item_id")}
        if data.path(L["seeds"]).is_file():
            self.seeds = {r["seed_id"]: r for r in checked_rows(data.path(L["seeds"]), "seed_id", "steps")}
        for _, p in data.files(L["rollouts"]):
            for r in checked_rows(p, "model", "item_id", "status"):
                self.rollouts[(r["model"], r["item_id"])] = r
        for _, p in data.files(L["judgments"]):
            for j in checked_rows(p, "model", "item_id", "judge", "axis", "status"):
                self.judgments.setdefault((j["model"], j["item_id"]), []).append(j)
        for _, p in data.files(L["panel"]):
            for r in checked_rows(p, "model", "item_id", "rollout_status"):
                self.panel[(r["model"], r["item_id"])] = r
        for model, item_id in [*self.panel, *self.rollouts]:
            self.models_of.setdefault(item_id, set()).add(model)
        for item_id, item in self.items.items():
            if item.get("pair_id"):
                self.by_pair.setdefault(item["pair_id"], []).append(item_id)
        rows = []
        panel_items = {item for (_, item) in self.panel}
        for (model, item_id), p in self.panel.items():
            rows.append(self._row(self.items.get(item_id, {"item_id": item_id}), model, p))
        for item_id, item in self.items.items():  # items no model was run on yet: one row without a model
            if item_id not in panel_items:
                rows.append(self._row(item, "", None))
        t33 = data.path(L["table33_overall"])
        if t33.is_file():
            with t33.open(newline="", encoding="utf-8") as fh:
                self.table33 = list(csv.DictReader(fh))
        return list_frame(rows, ["item_id", "model"])

    def _row(self, item: dict, model: str, panel: dict | None) -> dict:
        row = {"key": item["item_id"], "item_id": item["item_id"], "model": model,
               "pair_label": item.get("pair_label") or "", "dimension": item.get("dimension") or "",
               "domain": item.get("domain") or "", "prefix_kind": item.get("prefix_kind") or "",
               "seed_id": item.get("seed_id") or "", "rollout_status": (panel or {}).get("rollout_status", "")}
        rollout = self.rollouts.get((model, item["item_id"])) or {}
        for axis in self.axes:
            row[f"label_{axis}"] = (panel or {}).get(axis, "")
            votes = list(((panel or {}).get(f"{axis}_votes") or {}).values())
            row[f"agreement_{axis}"] = consensus(votes) if panel else ""
        row["text"] = " ".join(str(x) for x in (item["item_id"], item.get("seed_id"), item.get("model_input"),
                                                 item.get("rationale"), rollout.get("thought"),
                                                 rollout.get("action")) if x).lower()
        return row

    def legend(self) -> dict[str, dict[str, str]]:
        dims = {"original": "the item as cut from its seed, not varied",
                **{code: f"{d['name']} ({d['family'].replace('_', ' ')})" for code, d in dimension_specs().items()}}
        return {**{AXIS_HEADINGS.get(a, a): scale(AXES[a]["prompt"], LABELS[a]) for a in self.axes},
                "pair label": PAIR_LABELS, "dimension": dims, **VOTES}

    def partner(self, item: dict) -> dict | None:
        if not item.get("pair_id"):
            return None
        return next((self.items[i] for i in self.by_pair.get(item["pair_id"], []) if i != item["item_id"]), None)

    def source_steps(self, item: dict) -> tuple[str, list[dict]] | None:
        """What a variation is diffed against: its source seed's steps cut to the item's prefix length
        (seeds file), else the dataset's original item of the same seed and prefix."""
        seed = self.seeds.get(item.get("seed_id"))
        if seed is not None:
            return f"source seed {seed['seed_id']}", seed["steps"][:len(item.get("steps") or [])]
        original = next((r for r in self.items.values() if r.get("seed_id") == item.get("seed_id")
                         and r.get("prefix_kind") == item.get("prefix_kind") and r.get("dimension") == "original"
                         and r["item_id"] != item["item_id"]), None)
        return (f"original item {original['item_id']}", original["steps"]) if original else None

    def item(self, pages: Pages, key: str) -> str | None:
        if key not in self.items:
            return None
        item = self.items[key]
        item_text = render_steps(item.get("steps") or []).splitlines()
        source = self.source_steps(item)
        diff = unvaried = None
        if source is not None:
            name, steps = source
            source_text = render_steps(steps).splitlines()
            if source_text == item_text:  # an original: its text once, no table saying "No Differences Found"
                unvaried = name
            else:
                diff = difflib.HtmlDiff(wrapcolumn=70).make_table(source_text, item_text, fromdesc=html.escape(name),
                                                                  todesc=html.escape(f"this item ({key})"),
                                                                  context=True, numlines=1)
        per_model = []
        for m in sorted(self.models_of.get(key, ())):
            judgments = self.judgments.get((m, key), [])
            panel = self.panel.get((m, key))
            judges = sorted({j["judge"] for j in judgments}
                            | {j for a in self.axes for j in ((panel or {}).get(f"{a}_votes") or {})})
            cells = {(j["judge"], j["axis"]): j for j in judgments}
            per_model.append({"model": m, "rollout": self.rollouts.get((m, key)), "panel": panel,
                              "judges": judges, "cells": cells})
        return pages.render_part(self, "aura_item.html", item=item, partner=self.partner(item), diff=diff,
                                 unvaried=unvaried, per_model=per_model, axes=list(self.axes))

    def tables(self, pages: Pages) -> str | None:
        """Table 33: per model, the panel's Unsafe / Safe / excluded counts on NSP and SP items, each
        count linked to exactly its rows."""
        if not self.table33:
            return None
        t33 = []
        for r in self.table33:
            row = {"model": r["model"], "label": r.get("label") or r["model"], "cells": []}
            for pl, key in (("NSP", "unsafe_nsp"), ("SP", "unsafe_sp")):
                k, n, excl = (int(float(r[f"{key}_{x}"] or 0)) for x in ("k", "n", "excluded"))
                for label, count in (("Unsafe", k), ("Safe", n - k), ("excluded", excl)):
                    row["cells"].append({"pair_label": pl, "label": label, "count": count,
                                         "href": pages.links.rows(self.name, model=r["model"], pair_label=pl,
                                                                  axis="safety", label=label)})
            t33.append(row)
        return pages.render_part(self, "aura_tables.html", t33=t33)


PART = AuraViewer
