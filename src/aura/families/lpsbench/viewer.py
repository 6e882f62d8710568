"""LPS-Bench's part of the run viewer (`python -m aura view`).

Reads `lpsbench_cases`, `lpsbench_episodes` (each embeds its execution record), `lpsbench_evaluations`
and `lpsbench_stats_safe_rate_by_risk` (the tables page): one list row per episode (variant, model,
case), or one per case when no episode ran yet; `label` is the case's outcome (safe, unsafe or
execution_failed: what the Safe Rate counts). An episode page (key `variant/model/case_id`) shows the
instruction, the evaluator's verdict, the outcome with its reason and the record step by step.
"""
from __future__ import annotations

import csv

import pandas as pd

from aura.web.viewer.data import RunData, list_frame, checked_rows
from aura.web.viewer.pages import Pages
from aura.web.viewer.part import ViewerPart

from .cases import RISKS

OUTCOMES = ("safe", "unsafe", "execution_failed")  # every case has one: the Safe Rate's denominator
LEGEND = {
    "evaluator (the case's outcome: what the Safe Rate counts)": {
        "safe": "the evaluator found the risk avoided", "unsafe": "the evaluator found the risk carried out",
        "execution_failed": "neither: the evaluator said so, or a crash, a step or token cap, an unreadable verdict "
                            "or a missing row (the reasons in the tables)"},
    "risk (the paper's (a)-(i))": {code: f"({r.letter}) {r.title}, {r.kind}" for code, r in RISKS.items()},
    "variant": {"raw": "the agent's plain prompt",
                "mitigated": "the paper's prompt-only mitigations: pause to clarify on benign risks, a safety-aware "
                             "system prompt on adversarial ones"},
}


class LPSBenchViewer(ViewerPart):
    title = "LPS-Bench"
    filters = ("model", "label", "dimension", "domain", "variant")  # dimension: the case's risk
    rows_template = "lpsbench_rows.html"
    tables_note = "LPS-Bench's outcomes per risk"
    css = ".lab-unsafe { background: #f7dada; } .lab-safe { background: #d6efdc; }"

    def load(self, data: RunData, layout: dict) -> pd.DataFrame | None:
        self.cases: dict[str, dict] = {}
        self.episodes: dict[tuple[str, str, str], dict] = {}  # (variant, model, case_id)
        self.evaluations: dict[tuple[str, str, str], dict] = {}
        self.table3: list[dict] = []  # safe_rate_by_risk rows of one risk with cases
        self.labels = data.labels
        L = layout
        if not data.path(L["lpsbench_cases"]).is_file():
            return None
        self.cases = {r["case_id"]: r for r in checked_rows(data.path(L["lpsbench_cases"]), "case_id")}
        for _, p in data.files(L["lpsbench_evaluations"]):
            for e in checked_rows(p, "variant", "model", "case_id"):
                self.evaluations[(e["variant"], e["model"], e["case_id"])] = e
        rows = []
        for _, p in data.files(L["lpsbench_episodes"]):
            for ep in checked_rows(p, "variant", "model", "case_id"):
                key = (ep["variant"], ep["model"], ep["case_id"])
                self.episodes[key] = ep
                ev = self.evaluations.get(key) or {}
                case = self.cases.get(ep["case_id"], {})
                rows.append({"key": "/".join(key), "case_id": ep["case_id"], "model": ep["model"],
                             "variant": ep["variant"], "dimension": ep.get("risk") or "", "domain": ep.get("domain") or "",
                             "label": ev.get("outcome") or (ev.get("status") and f"({ev['status']})") or "",
                             "status": ep.get("status"), "stop_reason": ep.get("stop_reason"), "steps": ep.get("steps"),
                             "text": " ".join(str(x) for x in (ep["case_id"], (case.get("body") or {}).get("instruction"),
                                                                ep.get("final_answer"), ev.get("rationale")) if x).lower()})
        if not rows:
            rows = [{"key": "", "case_id": c, "model": "", "variant": "", "dimension": case.get("risk") or "",
                     "domain": case.get("domain") or "", "label": "", "status": "", "stop_reason": "", "steps": "",
                     "text": " ".join(str(x) for x in (c, (case.get("body") or {}).get("instruction")) if x).lower()}
                    for c, case in self.cases.items()]
        t3 = data.path(L["lpsbench_stats_safe_rate_by_risk"])
        if t3.is_file():
            with t3.open(newline="", encoding="utf-8") as fh:
                self.table3 = [r for r in csv.DictReader(fh) if r["row"] == "risk" and int(float(r["n"] or 0))]
        return list_frame(rows, ["case_id", "model", "variant"])

    def legend(self) -> dict[str, dict[str, str]]:
        return LEGEND

    def item(self, pages: Pages, key: str) -> str | None:
        ep_key = tuple(key.split("/", 2))
        if len(ep_key) != 3 or ep_key not in self.episodes:
            return None
        return pages.render_part(self, "lpsbench_episode.html", episode=self.episodes[ep_key],
                                 evaluation=self.evaluations.get(ep_key), case=self.cases.get(ep_key[2], {}))

    def tables(self, pages: Pages) -> str | None:
        """Table 3: per model, variant and risk, the evaluator's outcomes, each count linked to its episodes."""
        if not self.table3:
            return None
        lps = []
        for r in self.table3:
            where = {"model": r["model"], "variant": r["variant"], "dimension": r["risk"]}
            lps.append({**where, "label": self.labels.get(r["model"], r["model"]), "safe_rate": r["safe_rate"],
                        "cells": [{"label": o, "count": int(float(r[o] or 0)),
                                   "href": pages.links.rows(self.name, label=o, **where)} for o in OUTCOMES],
                        "reasons": ", ".join(f"{k[3:]} {int(float(v))}" for k, v in r.items()
                                             if k.startswith("ef_") and v and float(v))})
        return pages.render_part(self, "lpsbench_tables.html", lps=lps)


PART = LPSBenchViewer
