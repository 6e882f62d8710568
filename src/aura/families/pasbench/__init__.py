"""The PaSBench family: proactive risk detection on text observation logs and images (issue 10; paper:
"Towards Evaluating Proactive Risk Awareness of Multimodal Language Models").

Stages (rules/pasbench/pasbench.smk runs them): items are loaded from the configured folder (or a pinned
download); every evaluated model answers each item N times in the proactive setting (images only to models
with vision), a judge decides per sample whether the answer names the item's risk; the knowledge probe,
the reactive probe on the failed samples and propose-then-verify run per model when configured; one stats
job writes the CSVs every figure/table notebook reads. Construction of new PaSBench-style sets (text logs,
optionally images) runs when `pasbench.construct.enabled`.
This manifest imports nothing heavy: stage targets are strings, imported only when a stage runs.
"""
from __future__ import annotations

from pathlib import Path

import yaml

from aura.config import REPO_ROOT
from aura.families.base import Call, Family, Stage

from .settings import evaluated, section

P = "aura.families.pasbench"
ITEMS = {"items": "pasbench_items"}
JUDGE = "pasbench.judge"
# The stats stage's CSVs (`--out <name>`), layout key pasbench_stats_<name>; the three probe tables only when
# their probe is on.
STATS = ("rates", "k_curves", "k_curve_left_out", "word_length", "image_count", "severity", "pearson_models",
         "pearson_samples")
PROBE_STATS = {"knowledge": "knowledge_probe", "reactive": "reactive_probe", "propose_verify": "propose_verify"}
# Per-model outputs of each model stage (layout key pasbench_<name>), the probes' behind their switch.
PER_MODEL = ("responses", "judgments")
PROBES = {"knowledge": "knowledge_probe", "reactive": "reactive_probe", "verified": "propose_verify"}

STAGES: dict[str, Stage] = {
    "pasbench-fetch": Stage("download the pinned PaSBench archive (pasbench.data.download), verify its checksum",
                            f"{P}.data:run_fetch"),
    "pasbench-items": Stage("load the PaSBench text/image items (upstream JSON layout), capped by max_items",
                            f"{P}.data:run_items", inputs={"data_dir": None}, outputs=ITEMS),
    "pasbench-respond": Stage(
        "proactive setting: one model answers every item N times (images: vision models only)", f"{P}.respond:run",
        inputs=ITEMS, outputs={"responses": "pasbench_responses"}, prompts=("proactive_text", "proactive_image"),
        calls={"respond": Call("evaluated", "--model", out_tokens=300)}),
    "pasbench-judge": Stage(
        "the judge decides per sample whether the answer names the item's risk", f"{P}.judge:run",
        inputs={**ITEMS, "responses": "pasbench_responses"}, outputs={"judgments": "pasbench_judgments"},
        prompts=("risk_judge",), calls={"judge": Call("judge", JUDGE, out_tokens=80)}),
    "pasbench-knowledge": Stage(
        "Figure 5: A true / B false / C not sure + why on each knowledge point; the judge grades the explanation "
        "of every A", f"{P}.probes:run_knowledge", inputs=ITEMS, outputs={"knowledge": "pasbench_knowledge"},
        prompts=("knowledge_probe", "knowledge_judge"),
        calls={"probe": Call("evaluated", "--model", ("knowledge_probe",), out_tokens=200),
               "judge": Call("judge", JUDGE, ("knowledge_judge",), out_tokens=80)}),
    "pasbench-reactive": Stage(
        "Table 2: knowledge + observation asked on every failed proactive sample, judged", f"{P}.probes:run_reactive",
        inputs={**ITEMS, "judgments": "pasbench_judgments"}, outputs={"reactive": "pasbench_reactive"},
        prompts=("reactive_text", "reactive_image", "risk_judge"),
        calls={"probe": Call("evaluated", "--model", ("reactive_text", "reactive_image"), out_tokens=300),
               "judge": Call("judge", JUDGE, ("risk_judge",), out_tokens=80)}),
    "pasbench-verify": Stage(
        "propose-then-verify: the model verifies each of its own risk proposals", f"{P}.probes:run_verify",
        inputs={**ITEMS, "responses": "pasbench_responses"}, outputs={"verified": "pasbench_verified"},
        prompts=("verify_text", "verify_image"), calls={"verify": Call("evaluated", "--model", out_tokens=80)}),
    "pasbench-stats": Stage(
        "Average/Best/Worst-of-N, K curves, probes, correlations, buckets: the report CSVs", f"{P}.stats:run",
        inputs={**ITEMS, **{name: None for name in ("judgments", *PROBES)}},
        outputs={name: f"pasbench_stats_{name}" for name in (*STATS, *PROBE_STATS)}),
    "pasbench-reproduce": Stage(
        "the paper's reported numbers beside the run's, a verdict each; the paper checked against itself",
        f"{P}.reproduction:run",
        inputs={**ITEMS, **{name: f"pasbench_stats_{name}" for name in (
            "rates", "k_curves", "pearson_models", "pearson_samples", "knowledge", "reactive")}},
        outputs={"verdicts": "pasbench_reproduction", "findings": "pasbench_reproduction_consistency"}),
    "pasbench-construct-text": Stage(
        "new text items: knowledge -> role profile -> observation log, checked in code", f"{P}.construct:run_text",
        inputs={"items": None}, outputs={"drafts": "pasbench_construct_text_drafts"},
        prompts=("construct_profile", "construct_log"),
        calls={"construct": Call("generator", "pasbench.construct.generator", out_tokens=600, per_item=2)}),
    "pasbench-review-text": Stage(
        "review verdicts on constructed logs (a person's overrides applied)", f"{P}.construct:run_review",
        inputs={"drafts": "pasbench_construct_text_drafts"},
        outputs={"items": "pasbench_constructed_text", "reviews": "pasbench_construct_text_reviews",
                 "exclusions": "pasbench_construct_text_exclusions"},
        prompts=("construct_review",), calls={"review": Call("reviewer", "pasbench.construct.reviewer", out_tokens=80)}),
    "pasbench-construct-images": Stage(
        "new image items: knowledge -> 1-4 image prompts -> images endpoint", f"{P}.construct:run_images",
        inputs={"items": None},
        outputs={"items": "pasbench_constructed_images", "drafts": "pasbench_construct_image_drafts",
                 "exclusions": "pasbench_construct_image_exclusions"},
        prompts=("construct_image_prompts", "construct_image_check"),
        calls={"prompts": Call("generator", "pasbench.construct.images.prompt_model", ("construct_image_prompts",),
                               out_tokens=600),
               "images": Call(None, "pasbench.construct.images.model"),  # the images endpoint: priced per image
               "check": Call("image_check", "pasbench.construct.images.check_model", ("construct_image_check",),
                             out_tokens=80)}),
}


def layout(raw: dict) -> dict[str, str]:
    i, r = raw["paths"]["interim"], raw["paths"]["results"]
    pi, pr = f"{i}/pasbench", f"{r}/pasbench"
    return {
        "pasbench_items": f"{pi}/items.jsonl",
        **{f"pasbench_{name}": f"{pr}/{name}/{{model}}.jsonl" for name in (*PER_MODEL, *PROBES)},
        **{f"pasbench_stats_{name}": f"{pr}/stats/{name}.csv" for name in (*STATS, *PROBE_STATS)},
        "pasbench_reproduction": f"{pr}/reproduction.csv",  # the reproduce stage: verdicts, the paper's own findings
        "pasbench_reproduction_consistency": f"{pr}/reproduction_consistency.csv",
        "pasbench_construct_text_drafts": f"{pi}/construct/text_drafts.jsonl",
        "pasbench_construct_text_reviews": f"{pi}/construct/text_reviews.jsonl",
        "pasbench_construct_text_exclusions": f"{pi}/construct/text_exclusions.jsonl",
        "pasbench_constructed_text": f"{pi}/constructed_text.jsonl",
        "pasbench_construct_image_drafts": f"{pi}/construct/image_drafts.jsonl",
        "pasbench_construct_image_exclusions": f"{pi}/construct/image_exclusions.jsonl",
        "pasbench_constructed_images": f"{pi}/constructed_images.jsonl",
    }


def samples_of(raw: dict, model: str, modality: str) -> int:
    """N proactive samples per item of `model` on one set (`modality`): its `pasbench.samples_by_model` entry
    (an integer for both sets, or {text, image}: a set it leaves out keeps pasbench.samples), else
    pasbench.samples. Samples 0..pasbench.samples-1 feed every table and probe; the K curves use all."""
    pb = section(raw)
    base = int(pb.get("samples", 16))
    own = (pb.get("samples_by_model") or {}).get(model)
    if isinstance(own, dict):
        return int(own.get(modality, base))
    return base if own is None else int(own)


def samples_entry(raw: dict, model: str) -> list:
    """The model's `pasbench.samples_by_model` entry as a list (empty when it has none): what its respond job's
    params hash adds, so a model without one keeps the hash it had before the setting existed."""
    own = (section(raw).get("samples_by_model") or {}).get(model)
    return [] if own is None else [own]


def probe_on(raw: dict, switch: str) -> bool:
    return bool(evaluated(raw)) and bool(section(raw).get(switch, True))


def stats_outputs(raw: dict) -> list[str]:
    """The stats CSVs this config produces (their `--out` names)."""
    return [*STATS, *[name for name, switch in PROBE_STATS.items() if probe_on(raw, switch)]]


def construct_on(raw: dict, part: str = "text") -> bool:
    c = section(raw).get("construct") or {}
    return bool(c.get("enabled")) and (part == "text" or bool((c.get("images") or {}).get("enabled")))


def check(raw: dict) -> list[str]:
    """Problems of the `pasbench` section the schema cannot see (models by name), one line each."""
    pb, models = section(raw), raw.get("models", {})
    problems = []
    named = [("pasbench.evaluated", m) for m in evaluated(raw)]
    if evaluated(raw):
        if not pb.get("judge"):
            problems.append("pasbench.judge: a judge model is required when pasbench.evaluated is not empty")
        named.append(("pasbench.judge", pb.get("judge")))
    c = pb.get("construct") or {}
    if c.get("enabled"):
        named += [("pasbench.construct.generator", c.get("generator")), ("pasbench.construct.reviewer", c.get("reviewer"))]
        if (c.get("images") or {}).get("enabled"):
            named.append(("pasbench.construct.images.model", c["images"].get("model")))
            if c["images"].get("prompt_model"):  # optional: null drafts with the generator
                named.append(("pasbench.construct.images.prompt_model", c["images"]["prompt_model"]))
            if c["images"].get("check_model"):  # optional: null keeps every returned PNG unchecked
                named.append(("pasbench.construct.images.check_model", c["images"]["check_model"]))
    from . import roster

    problems += roster.problems(raw)  # the paper's roster: every named model run or marked unavailable
    named += [("pasbench.samples_by_model", m) for m in (pb.get("samples_by_model") or {})]
    named += [("pasbench.model_params", m) for m in (pb.get("model_params") or {})]
    for key, model in named:
        if model and model not in models:
            problems.append(f"{key}: unknown model '{model}' (not under models:)")
        elif not model and key.startswith("pasbench.construct"):
            problems.append(f"{key}: a model is required when construction is enabled")
    return problems


def _rates(name: str, notebook: str, inputs: list[str], needs=None, figure: bool = True) -> dict:
    spec = {"notebook": f"{notebook}.ipynb", "inputs": inputs, "tables": [name]}
    if not figure:
        spec["figure"] = False
    if needs:
        spec["needs"] = needs
    return spec


def _evaluating(raw: dict) -> bool:
    return bool(evaluated(raw))


REPORTS: dict[str, dict] = {
    "pasbench_fig3_image_rates": _rates("pasbench_fig3_image_rates", "fig3_image_rates", ["pasbench_stats_rates"],
                                        _evaluating),
    "pasbench_fig4_text_rates": _rates("pasbench_fig4_text_rates", "fig4_text_rates", ["pasbench_stats_rates"],
                                       _evaluating),
    "pasbench_fig5_knowledge": _rates("pasbench_fig5_knowledge", "fig5_knowledge", ["pasbench_stats_knowledge"],
                                      lambda raw: probe_on(raw, "knowledge_probe")),
    "pasbench_table2_reactive": _rates("pasbench_table2_reactive", "table2_reactive", ["pasbench_stats_reactive"],
                                       lambda raw: probe_on(raw, "reactive_probe"), figure=False),
    "pasbench_fig7_k_curves": {**_rates("pasbench_fig7_k_curves", "fig7_k_curves",
                                        ["pasbench_stats_k_curves", "pasbench_stats_k_curve_left_out"], _evaluating),
                               "tables": ["pasbench_fig7_k_curves", "pasbench_fig7_k_curves_left_out"]},
    "pasbench_fig8_pearson_models": _rates("pasbench_fig8_pearson_models", "fig8_pearson_models",
                                           ["pasbench_stats_rates", "pasbench_stats_pearson_models"], _evaluating),
    "pasbench_fig9_pearson_samples": _rates("pasbench_fig9_pearson_samples", "fig9_pearson_samples",
                                            ["pasbench_stats_pearson_samples"], _evaluating),
    "pasbench_fig10_word_length": _rates("pasbench_fig10_word_length", "fig10_word_length",
                                         ["pasbench_stats_word_length"], _evaluating),
    "pasbench_fig11_image_count": _rates("pasbench_fig11_image_count", "fig11_image_count",
                                         ["pasbench_stats_image_count"], _evaluating),
    "pasbench_severity": _rates("pasbench_severity", "severity", ["pasbench_stats_severity"], _evaluating),
    "pasbench_propose_verify": _rates("pasbench_propose_verify", "propose_verify", ["pasbench_stats_propose_verify"],
                                      lambda raw: probe_on(raw, "propose_verify")),
    # construction: the image job's files too (with images off it writes them empty, with no model call)
    "pasbench_construction": {
        "notebook": "construction.ipynb",
        "inputs": ["pasbench_construct_text_drafts", "pasbench_construct_text_reviews", "pasbench_constructed_text",
                   "pasbench_construct_text_exclusions", "pasbench_construct_image_drafts",
                   "pasbench_constructed_images", "pasbench_construct_image_exclusions"],
        "figure": False,
        "tables": ["pasbench_construction_funnel", "pasbench_construction_exclusions"],
        "needs": construct_on,
    },
}

# The reproduction report (docs/reproducing.md), kept apart from REPORTS (the stats notebooks, which
# tests/core/test_notebooks_degenerate.py renders on synthetic stats); tested in tests/pasbench/test_pasbench_reproduction.py.
REPRODUCTION_REPORTS: dict[str, dict] = {
    "pasbench_reproduction": {"notebook": "reproduction.ipynb",
                              "inputs": ["pasbench_reproduction", "pasbench_reproduction_consistency"],
                              "tables": ["pasbench_reproduction", "pasbench_reproduction_consistency"],
                              "needs": _evaluating},
}


def targets(config: dict) -> list[str]:
    """What `snakemake all` builds for PaSBench: the items, the stats CSVs and every enabled figure/table
    (when models are evaluated), and the constructed items (when construction is on)."""
    from aura.pipeline import rules_support as S

    L = layout(config)
    out = [L["pasbench_items"]]
    if evaluated(config):
        out += [L[f"pasbench_stats_{name}"] for name in stats_outputs(config)] + [L["pasbench_reproduction"]]
    if construct_on(config):
        out += [L["pasbench_constructed_text"]]
    if construct_on(config, "images"):
        out += [L["pasbench_constructed_images"]]
    return out + S.report_targets(config, {**REPORTS, **REPRODUCTION_REPORTS})


# name -> (folder under prompts/pasbench/, '' for none; version in use)
PROMPTS: dict[str, tuple[str, int]] = {
    "proactive_text": ("", 3),  # v3: the paper's task (think, then remind of the danger and why: what the judge grades)
    "proactive_image": ("", 3),
    "risk_judge": ("", 1),
    "knowledge_probe": ("", 3),  # v3: the paper's question in its form, answered in free text (issue 33)
    "knowledge_judge": ("", 2),
    "reactive_text": ("", 1),
    "reactive_image": ("", 1),
    "verify_text": ("", 1),
    "verify_image": ("", 1),
    "construct_profile": ("", 1),
    "construct_log": ("", 3),
    "construct_review": ("", 1),
    "construct_image_prompts": ("", 2),
    "construct_image_check": ("", 1),
}

FAMILY = Family(
    name="pasbench", title="PaSBench: proactive safety risk detection on text logs and images",
    stages=STAGES, layout=layout, reports={**REPORTS, **REPRODUCTION_REPORTS}, targets=targets,
    root=REPO_ROOT, demo_data=(REPO_ROOT / "data" / "raw" / "pasbench_demo",),
    prompts=PROMPTS, data_prompts=frozenset(),
    schema=yaml.safe_load((Path(__file__).parent / "schema.yaml").read_text()), check=check,
    moved_keys={"estimate.pasbench_miss_share": "pasbench.estimate.miss_share"},
    estimate="aura.families.pasbench.estimate:pasbench_lines",
    viewer="aura.families.pasbench.viewer:PART", order=1,
    inspect_tasks="aura.families.pasbench.inspect_task:TASKS",
    export="aura.families.pasbench.dataset_export:export", reproduction="pasbench_reproduction",
    rehearsal="aura.families.pasbench.rehearsal:planter",
)
