"""Stage construction-counts: the dataset composition table (paper C.3 / Table 29) and the
construction funnel, each with the paper's figures in a reference column beside ours."""
from __future__ import annotations

import pandas as pd

from ..io import atomic_write_text, read_jsonl
from ..pipeline.context import StageContext
from ..provenance import provenance, write_provenance

# Paper, Appendix C.3 and H (157 R-Judge seeds). None = the paper gives no number.
PAPER_COMPOSITION = {
    "rows": 1249, "original rows": 341, "variation rows": 908, "paired rows": 816, "pairs": 408,
    "unpaired rows": 433, "NSP rows": 624, "SP rows": 625, "at-trigger rows": 947, "pre-execution rows": 302,
    "domain: Application": 348, "domain: IoT": 318, "domain: Program": 326, "domain: Web": 151, "domain: Finance": 106,
}
PAPER_FUNNEL = {
    "seeds selected": 157, "seeds tagged": 157, "prefixes": 211, "prefixes at-trigger": 157,
    "prefixes pre-execution": 54, "variation requests": 1029, "variation requests RS1": 200,
    "variation requests RS2-RS6, SD1-SD5": 829, "variations parseable": 916, "variations passing agent-step check": None,
    "variations kept by review": 650, "merged pool": 861, "pool classified": None, "pair candidates": 593,
    "pair candidates parseable": 590, "pairs passing code checks": None, "pairs kept by review": 428,
    "released rows": 1249,
}


def _all(ctx: StageContext, prefix: str) -> list[dict]:
    return [r for name, p in ctx.inputs.items() if name.startswith(prefix) for r in read_jsonl(p)]


def composition(dataset: list[dict]) -> dict[str, int]:
    df = pd.DataFrame(dataset, columns=["dimension", "pair_id", "pair_label", "prefix_kind", "domain"])
    paired = df["pair_id"].notna()
    out = {
        "rows": len(df), "original rows": int((df["dimension"] == "original").sum()),
        "variation rows": int((df["dimension"] != "original").sum()), "paired rows": int(paired.sum()),
        "pairs": int(df.loc[paired, "pair_id"].nunique()), "unpaired rows": int((~paired).sum()),
        "NSP rows": int((df["pair_label"] == "NSP").sum()), "SP rows": int((df["pair_label"] == "SP").sum()),
        "at-trigger rows": int((df["prefix_kind"] == "at_trigger").sum()),
        "pre-execution rows": int((df["prefix_kind"] == "pre_execution").sum()),
    }
    for d in ("Application", "IoT", "Program", "Web", "Finance"):
        out[f"domain: {d}"] = int((df["domain"] == d).sum())
    return out


def funnel(ctx: StageContext) -> dict[str, int]:
    tags, prefixes, relevance = ctx.read("tags"), ctx.read("prefixes"), ctx.read("relevance")
    variations, classified, pairs = ctx.read("variations"), ctx.read("classified"), ctx.read("pairs")
    requests = [rq for r in relevance for rq in r["requests"]]
    parsed_pairs = [p for p in pairs if p["status"] in ("ok", "rejected")]
    return {
        "seeds selected": len(ctx.read("seeds")),
        "seeds tagged": sum(t["status"] == "ok" for t in tags),
        "prefixes": len(prefixes),
        "prefixes at-trigger": sum(p["prefix_kind"] == "at_trigger" for p in prefixes),
        "prefixes pre-execution": sum(p["prefix_kind"] == "pre_execution" for p in prefixes),
        "variation requests": len(requests),
        "variation requests RS1": sum(rq["dimension"] == "RS1" for rq in requests),
        "variation requests RS2-RS6, SD1-SD5": sum(rq["dimension"] != "RS1" for rq in requests),
        "variations parseable": sum(v["status"] in ("ok", "rejected") for v in variations),
        "variations passing agent-step check": sum(v["status"] == "ok" for v in variations),
        "variations kept by review": sum(c["dimension"] != "original" for c in classified),
        "merged pool": len(classified),
        "pool classified": sum(c["status"] == "ok" for c in classified),
        "pair candidates": len(pairs),
        "pair candidates parseable": len(parsed_pairs),
        "pairs passing code checks": sum(p["status"] == "ok" for p in pairs),
        "pairs kept by review": sum(1 for r in ctx.read("dataset") if r["pair_role"] == "counterpart"),
        "released rows": len(ctx.read("dataset")),
    }


def _table(ours: dict[str, int], paper: dict[str, int | None], what: str) -> pd.DataFrame:
    return pd.DataFrame({what: list(ours), "ours": list(ours.values()),
                         "paper": [paper.get(k) for k in ours]}).astype({"paper": "Int64"})


def run(ctx: StageContext) -> None:
    tables = {"composition": _table(composition(ctx.read("dataset")), PAPER_COMPOSITION, "count"),
              "funnel": _table(funnel(ctx), PAPER_FUNNEL, "stage")}
    for name, table in tables.items():
        out = ctx.outputs[name]
        write_provenance(out, provenance(ctx.stage, ctx.config, inputs=[str(p) for p in ctx.inputs.values()],
                                         extra={"rows": len(table)}))
        atomic_write_text(out, table.to_csv(index=False))
