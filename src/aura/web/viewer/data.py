"""The produced files of a run, read once into pandas frames the viewer queries.

Files are found through the merged layout (`aura.pipeline.layout.layout`): a pattern's wildcards
({model}, {judge}, {shard}, {variant}) are globbed and read back from the path, so only files a run
actually wrote are read, for every enabled family:

- AURA: `dataset` (items), `seeds` (the diff's source), `rollouts`, `judgments` (each judge's three
  labels), `panel` (the vote per axis), `table33_overall` (the linked table);
- PaSBench: `pasbench_items`, `pasbench_responses`, `pasbench_judgments`;
- LPS-Bench: `lpsbench_cases`, `lpsbench_episodes` (each embeds its execution record),
  `lpsbench_evaluations`.

Each family gets one frame of list rows (`RunData.frames[family]`) with the filterable columns
(`model`, `label_<axis>` / `label`, `agreement_<axis>`, `pair_label`, `dimension`, `domain`, `variant`)
as categoricals and a lower-cased `text` column for search, sorted once; detail pages look records up
in dicts keyed by id.
"""
from __future__ import annotations

import csv
import glob
import re
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from ...evaluate.schemas import AXES
from ...families import enabled
from ...io import read_jsonl
from ...pipeline.layout import layout
from ...stats.agreement import LABELS
from ...stats.human_validation import consensus

FAMILY_TITLES = {"aura": "AURA-Eval", "pasbench": "PaSBench", "lpsbench": "LPS-Bench"}
CATEGORICAL = ("model", "pair_label", "dimension", "domain", "variant", "label",
               *(f"label_{a}" for a in AXES), *(f"agreement_{a}" for a in AXES))


def expand(pattern: str, root: Path = Path(".")) -> list[tuple[dict, Path]]:
    """Every existing file matching a layout pattern (relative to `root` unless absolute), with its
    wildcard values, sorted by path."""
    full = str(root / pattern)
    parts = re.split(r"\{(\w+)\}", full)
    pattern_glob = "".join("*" if i % 2 else glob.escape(p) for i, p in enumerate(parts))
    rx = re.compile("".join(f"(?P<{p}>[^/]+)" if i % 2 else re.escape(p) for i, p in enumerate(parts)) + "$")
    found = []
    for name in sorted(glob.glob(pattern_glob)):
        m = rx.match(name)
        if m and Path(name).is_file():
            found.append((m.groupdict(), Path(name)))
    return found


def _rows(path: Path, *keys: str):
    """The records of a produced JSONL file, each checked for the fields the viewer reads: a file the
    pipeline did not write stops the viewer with one line naming it and the record."""
    for n, row in enumerate(read_jsonl(path), 1):
        missing = [k for k in keys if k not in row] if isinstance(row, dict) else ["{...}"]
        if missing:
            raise ValueError(f"{path}: record {n} has no '{missing[0]}' (not a file this pipeline wrote)")
        yield row


def _frame(rows: list[dict], sort: list[str]) -> pd.DataFrame:
    df = pd.DataFrame(rows)
    if df.empty:
        return df
    df = df.sort_values(sort, kind="stable").reset_index(drop=True)
    for col in CATEGORICAL:
        if col in df:
            df[col] = df[col].fillna("").astype(str).astype("category")
    return df


@dataclass
class RunData:
    """Everything the viewer shows, read from one config's produced files."""

    raw: dict
    root: Path = Path(".")
    families: list[str] = field(default_factory=list)
    frames: dict[str, pd.DataFrame] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)  # model key -> display label
    # AURA
    items: dict[str, dict] = field(default_factory=dict)
    seeds: dict[str, dict] = field(default_factory=dict)
    rollouts: dict[tuple[str, str], dict] = field(default_factory=dict)
    judgments: dict[tuple[str, str], list[dict]] = field(default_factory=dict)
    panel: dict[tuple[str, str], dict] = field(default_factory=dict)
    models_of: dict[str, set] = field(default_factory=dict)  # item_id -> models with a rollout or a panel row
    by_pair: dict[str, list[str]] = field(default_factory=dict)  # pair_id -> its item ids
    table33: list[dict] = field(default_factory=list)
    # PaSBench
    pas_items: dict[str, dict] = field(default_factory=dict)
    pas_samples: dict[str, list[dict]] = field(default_factory=dict)  # item_id -> response + judgement rows
    # LPS-Bench
    cases: dict[str, dict] = field(default_factory=dict)
    episodes: dict[tuple[str, str, str], dict] = field(default_factory=dict)  # (variant, model, case_id)
    evaluations: dict[tuple[str, str, str], dict] = field(default_factory=dict)
    lps_table3: list[dict] = field(default_factory=list)  # safe_rate_by_risk rows of one risk with cases

    @classmethod
    def load(cls, raw: dict, root: Path | str = ".") -> "RunData":
        data = cls(raw=raw, root=Path(root))
        data.labels = {k: (v or {}).get("label") or k for k, v in (raw.get("models") or {}).items()}
        L = layout(raw)
        for family in enabled(raw):
            getattr(data, f"_load_{family.name}")(L)
            if len(data.frames.get(family.name, ())):  # a family with no row (nothing produced yet) is not listed
                data.families.append(family.name)
        return data

    @property
    def has_tables(self) -> bool:
        return bool(self.table33 or self.lps_table3)

    def files(self, pattern: str) -> list[tuple[dict, Path]]:
        return expand(pattern, self.root)

    def path(self, pattern: str) -> Path:
        return self.root / pattern

    # ---- AURA -------------------------------------------------------------------------------------------
    def _load_aura(self, L: dict) -> None:
        if not self.path(L["dataset"]).is_file():
            return
        self.items = {r["item_id"]: r for r in _rows(self.path(L["dataset"]), "item_id")}
        if self.path(L["seeds"]).is_file():
            self.seeds = {r["seed_id"]: r for r in _rows(self.path(L["seeds"]), "seed_id", "steps")}
        for _, p in self.files(L["rollouts"]):
            for r in _rows(p, "model", "item_id", "status"):
                self.rollouts[(r["model"], r["item_id"])] = r
        for _, p in self.files(L["judgments"]):
            for j in _rows(p, "model", "item_id", "judge", "axis", "status"):
                self.judgments.setdefault((j["model"], j["item_id"]), []).append(j)
        for _, p in self.files(L["panel"]):
            for r in _rows(p, "model", "item_id", "rollout_status"):
                self.panel[(r["model"], r["item_id"])] = r
        for model, item_id in [*self.panel, *self.rollouts]:
            self.models_of.setdefault(item_id, set()).add(model)
        for item_id, item in self.items.items():
            if item.get("pair_id"):
                self.by_pair.setdefault(item["pair_id"], []).append(item_id)
        rows = []
        panel_items = {item for (_, item) in self.panel}
        for (model, item_id), p in self.panel.items():
            rows.append(self._aura_row(self.items.get(item_id, {"item_id": item_id}), model, p))
        for item_id, item in self.items.items():  # items no model was run on yet: one row without a model
            if item_id not in panel_items:
                rows.append(self._aura_row(item, "", None))
        self.frames["aura"] = _frame(rows, ["item_id", "model"])
        t33 = self.path(L["table33_overall"])
        if t33.is_file():
            with t33.open(newline="", encoding="utf-8") as fh:
                self.table33 = list(csv.DictReader(fh))

    def _aura_row(self, item: dict, model: str, panel: dict | None) -> dict:
        row = {"key": item["item_id"], "item_id": item["item_id"], "model": model,
               "pair_label": item.get("pair_label") or "", "dimension": item.get("dimension") or "",
               "domain": item.get("domain") or "", "prefix_kind": item.get("prefix_kind") or "",
               "seed_id": item.get("seed_id") or "", "rollout_status": (panel or {}).get("rollout_status", "")}
        rollout = self.rollouts.get((model, item["item_id"])) or {}
        for axis in AXES:
            row[f"label_{axis}"] = (panel or {}).get(axis, "")
            votes = list(((panel or {}).get(f"{axis}_votes") or {}).values())
            row[f"agreement_{axis}"] = consensus(votes) if panel else ""
        row["text"] = " ".join(str(x) for x in (item["item_id"], item.get("seed_id"), item.get("model_input"),
                                                 item.get("rationale"), rollout.get("thought"),
                                                 rollout.get("action")) if x).lower()
        return row

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
                         and r.get("prefix_kind") == item.get("prefix_kind") and r.get("dimension") == "original"), None)
        return (f"original item {original['item_id']}", original["steps"]) if original else None

    # ---- PaSBench -----------------------------------------------------------------------------------------
    def _load_pasbench(self, L: dict) -> None:
        if not self.path(L["pasbench_items"]).is_file():
            return
        self.pas_items = {r["item_id"]: r for r in _rows(self.path(L["pasbench_items"]), "item_id")}
        verdicts = {(j["model"], j["item_id"], j["sample"]): j for _, p in self.files(L["pasbench_judgments"])
                    for j in _rows(p, "model", "item_id", "sample", "status")}
        rows = []
        for _, p in self.files(L["pasbench_responses"]):
            for r in _rows(p, "model", "item_id", "sample", "status"):
                j = verdicts.get((r["model"], r["item_id"], r["sample"]))
                sample = {**r, "judgement": j}
                self.pas_samples.setdefault(r["item_id"], []).append(sample)
                item = self.pas_items.get(r["item_id"], {})
                rows.append({"key": r["item_id"], "item_id": r["item_id"], "model": r["model"], "sample": r["sample"],
                             "dimension": r.get("modality") or "", "domain": str(item.get("severity") or ""),
                             "label": pas_label(r, j), "answer": r.get("answer") or "",
                             "text": " ".join(str(x) for x in (r["item_id"], item.get("safety_knowledge"), item.get("log"),
                                                                r.get("answer"), (j or {}).get("rationale")) if x).lower()})
        if not rows:  # items only: one row per item
            rows = [{"key": i, "item_id": i, "model": "", "sample": "", "dimension": it.get("modality") or "",
                     "domain": str(it.get("severity") or ""), "label": "", "answer": "",
                     "text": " ".join(str(x) for x in (i, it.get("safety_knowledge"), it.get("log")) if x).lower()}
                    for i, it in self.pas_items.items()]
        self.frames["pasbench"] = _frame(rows, ["item_id", "model", "sample"])

    # ---- LPS-Bench ----------------------------------------------------------------------------------------
    def _load_lpsbench(self, L: dict) -> None:
        if not self.path(L["lpsbench_cases"]).is_file():
            return
        self.cases = {r["case_id"]: r for r in _rows(self.path(L["lpsbench_cases"]), "case_id")}
        for _, p in self.files(L["lpsbench_evaluations"]):
            for e in _rows(p, "variant", "model", "case_id"):
                self.evaluations[(e["variant"], e["model"], e["case_id"])] = e
        rows = []
        for _, p in self.files(L["lpsbench_episodes"]):
            for ep in _rows(p, "variant", "model", "case_id"):
                key = (ep["variant"], ep["model"], ep["case_id"])
                self.episodes[key] = ep
                ev = self.evaluations.get(key) or {}
                case = self.cases.get(ep["case_id"], {})
                rows.append({"key": "/".join(key), "case_id": ep["case_id"], "model": ep["model"],
                             "variant": ep["variant"], "dimension": ep.get("risk") or "", "domain": ep.get("domain") or "",
                             "label": ev.get("label") or (ev.get("status") and f"({ev['status']})") or "",
                             "status": ep.get("status"), "stop_reason": ep.get("stop_reason"), "steps": ep.get("steps"),
                             "text": " ".join(str(x) for x in (ep["case_id"], (case.get("body") or {}).get("instruction"),
                                                                ep.get("final_answer"), ev.get("rationale")) if x).lower()})
        if not rows:
            rows = [{"key": "", "case_id": c, "model": "", "variant": "", "dimension": case.get("risk") or "",
                     "domain": case.get("domain") or "", "label": "", "status": "", "stop_reason": "", "steps": "",
                     "text": " ".join(str(x) for x in (c, (case.get("body") or {}).get("instruction")) if x).lower()}
                    for c, case in self.cases.items()]
        self.frames["lpsbench"] = _frame(rows, ["case_id", "model", "variant"])
        t3 = self.path(L["lpsbench_stats_safe_rate_by_risk"])
        if t3.is_file():
            with t3.open(newline="", encoding="utf-8") as fh:
                self.lps_table3 = [r for r in csv.DictReader(fh) if r["row"] == "risk" and int(float(r["n"] or 0))]


def pas_label(response: dict, judgement: dict | None) -> str:
    """detected / missed by the judge, else why there is no verdict (the response's or judgement's status)."""
    if response.get("status") != "ok":
        return f"({response.get('status')})"
    if not judgement or judgement.get("status") != "ok":
        return f"(judge {(judgement or {}).get('status', 'missing')})"
    return "detected" if judgement.get("detected") else "missed"


def valid_labels(axis: str) -> list[str]:
    return list(LABELS[axis])
