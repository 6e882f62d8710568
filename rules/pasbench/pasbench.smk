# PaSBench (issue 10; manifest: src/aura/families/pasbench/__init__.py): items -> per evaluated model:
# proactive responses (N samples) -> judgments -> knowledge / reactive / propose-then-verify probes ->
# one stats job -> the figures and tables (rendered by the Snakefile's render rules). Construction of new
# sets runs beside it when pasbench.construct.enabled. Rules hold the DAG; each stage's command line, --in/--out
# names and prompts come from its declaration in the manifest (S.inputs, S.outputs, S.command), logs under
# logs/<rule>/.
import aura.families.pasbench as PB
import aura.families.pasbench.dag as PD  # the family's DAG helpers

# The section's own checks (models by name) ran when the config was read (the manifest's `check`).
PAS = config["pasbench"]
PAS_MODELS = PB.evaluated(config)
PAS_JUDGE = PAS["judge"]
PAS_CONSTRUCT = PAS["construct"]
PAS_MODEL_RE = "|".join(map(re.escape, config["models"]))


# ---- data: a folder in the upstream layout, or a pinned download of one --------------------------------
PAS_DOWNLOAD, PAS_DATA = PD.download(config), PD.data_dir(config)


if PAS_DOWNLOAD:
    rule pasbench_fetch:
        localrule: True   # no model call: on a cluster it runs in the main Snakemake process
        output: marker=f"{PAS_DOWNLOAD['dest']}/.fetched.json"
        params: url=PAS_DOWNLOAD["url"]
        log: f"{LOGS}/pasbench_fetch/pasbench_fetch.log"
        shell: S.command("pasbench-fetch")


rule pasbench_items:
    localrule: True   # no model call: on a cluster it runs in the main Snakemake process
    input: PD.data_files(config)
    output: **S.outputs(config, "pasbench-items")
    params: io=S.io, data_dir=PAS_DATA, cfg=S.section_hash(PAS["data"], PAS["max_items"])
    log: f"{LOGS}/pasbench_items/pasbench_items.log"
    shell: S.command("pasbench-items", folders={"data_dir": "{params.data_dir}"})


# ---- per evaluated model -----------------------------------------------------------------------------
rule pasbench_respond:
    input: **S.inputs(config, "pasbench-respond")
    output: **S.outputs(config, "pasbench-respond")
    wildcard_constraints: model=PAS_MODEL_RE
    # sampling: N (pasbench.samples, plus the model's pasbench.samples_by_model entry when it has one) and params
    params: io=S.io, cfg=lambda wc: PD.model_hash(config, wc.model),
            sampling=lambda wc: S.section_hash(PAS["samples"], PAS["params"], *PB.samples_entry(config, wc.model)) + PD.own_params(config, wc.model)
    resources: **S.endpoint_resources(config, lambda wc: wc.model)
    log: main=f"{LOGS}/pasbench_respond/{{model}}.log", calls=f"{LOGS}/pasbench_respond/{{model}}.calls.jsonl"
    shell: S.command("pasbench-respond", model="{wildcards.model}")


rule pasbench_judge:
    input: **S.inputs(config, "pasbench-judge")
    output: **S.outputs(config, "pasbench-judge")
    wildcard_constraints: model=PAS_MODEL_RE
    params: io=S.io, cfg=PD.model_hash(config, PAS_JUDGE), judge=PAS_JUDGE, reads=PAS.get("judge_reads", "answer")
    resources: **S.endpoint_resources(config, lambda wc: PAS_JUDGE)
    log: main=f"{LOGS}/pasbench_judge/{{model}}.log", calls=f"{LOGS}/pasbench_judge/{{model}}.calls.jsonl"
    shell: S.command("pasbench-judge", model="{wildcards.model}", judge="{params.judge}")


# The knowledge probe asks the evaluated model (A/B/C + why), then the judge grades each A's explanation in
# the same job (as the reactive probe: one job per model, both endpoints' calls cached).
rule pasbench_knowledge:
    input: **S.inputs(config, "pasbench-knowledge")
    output: **S.outputs(config, "pasbench-knowledge")
    wildcard_constraints: model=PAS_MODEL_RE
    params: io=S.io, cfg=lambda wc: PD.model_hash(config, wc.model, PAS_JUDGE) + PD.own_params(config, wc.model), judge=PAS_JUDGE
    resources: **S.endpoint_resources(config, lambda wc: wc.model)
    log: main=f"{LOGS}/pasbench_knowledge/{{model}}.log", calls=f"{LOGS}/pasbench_knowledge/{{model}}.calls.jsonl"
    shell: S.command("pasbench-knowledge", model="{wildcards.model}", judge="{params.judge}")


# The reactive probe calls the evaluated model and then the judge: one job holds both endpoints' resource
# (a model and its judge on one endpoint: 1 unit of it).
rule pasbench_reactive:
    input: **S.inputs(config, "pasbench-reactive")
    output: **S.outputs(config, "pasbench-reactive")
    wildcard_constraints: model=PAS_MODEL_RE
    params: io=S.io, cfg=lambda wc: PD.model_hash(config, wc.model, PAS_JUDGE), sampling=lambda wc: S.section_hash(PAS["params"]) + PD.own_params(config, wc.model), judge=PAS_JUDGE
    resources: **S.endpoint_resources(config, lambda wc: wc.model)
    log: main=f"{LOGS}/pasbench_reactive/{{model}}.log", calls=f"{LOGS}/pasbench_reactive/{{model}}.calls.jsonl"
    shell: S.command("pasbench-reactive", model="{wildcards.model}", judge="{params.judge}")


rule pasbench_verify:
    input: **S.inputs(config, "pasbench-verify")
    output: **S.outputs(config, "pasbench-verify")
    wildcard_constraints: model=PAS_MODEL_RE
    params: io=S.io, cfg=lambda wc: PD.model_hash(config, wc.model) + PD.own_params(config, wc.model)
    resources: **S.endpoint_resources(config, lambda wc: wc.model)
    log: main=f"{LOGS}/pasbench_verify/{{model}}.log", calls=f"{LOGS}/pasbench_verify/{{model}}.calls.jsonl"
    shell: S.command("pasbench-verify", model="{wildcards.model}")


# ---- statistics over every evaluated model: the CSVs the notebooks read ---------------------------------
# per-model files (a probe's files only when it is on): --in judgments_0=... knowledge_0=...
PAS_STATS_IN = {name: expand(L[f"pasbench_{name}"], model=PAS_MODELS)
                for name in ("judgments", *[n for n, switch in PB.PROBES.items() if PB.probe_on(config, switch)])}


rule pasbench_stats:
    localrule: True   # no model call: on a cluster it runs in the main Snakemake process
    input: **S.inputs(config, "pasbench-stats", **PAS_STATS_IN)
    output: **S.outputs(config, "pasbench-stats", only=PB.stats_outputs(config))
    params: io=S.io, cfg=S.section_hash(PAS["bootstrap"])
    log: f"{LOGS}/pasbench_stats/pasbench_stats.log"
    shell: S.command("pasbench-stats")


# ---- construction of new PaSBench-style items (paper §3.2) ---------------------------------------------
PAS_GEN, PAS_REVIEWER = PAS_CONSTRUCT["generator"], PAS_CONSTRUCT["reviewer"]
PAS_IMAGES = PAS_CONSTRUCT["images"]
# knowledge points from the items file (an integer) or listed in the config (then no items input)
PAS_KNOWLEDGE_IN = {"items": L["pasbench_items"]} if isinstance(PAS_CONSTRUCT["knowledge_points"], int) else {}
PAS_CONSTRUCT_CFG = S.section_hash({k: v for k, v in PAS_CONSTRUCT.items() if k not in ("images", "overrides", "reviewer", "enabled")})


rule pasbench_construct_text:
    input: **S.inputs(config, "pasbench-construct-text", **PAS_KNOWLEDGE_IN)
    output: **S.outputs(config, "pasbench-construct-text")
    params: io=S.io, cfg=PD.model_hash(config, PAS_GEN), construct=PAS_CONSTRUCT_CFG
    resources: **S.endpoint_resources(config, lambda wc: PAS_GEN)
    log: main=f"{LOGS}/pasbench_construct_text/construct_text.log", calls=f"{LOGS}/pasbench_construct_text/construct_text.calls.jsonl"
    shell: S.command("pasbench-construct-text")


rule pasbench_review_text:
    input: **S.inputs(config, "pasbench-review-text", rerun={"overrides": [PAS_CONSTRUCT["overrides"]] if PAS_CONSTRUCT["overrides"] else []})
    output: **S.outputs(config, "pasbench-review-text")
    params: io=S.io, cfg=PD.model_hash(config, PAS_REVIEWER)
    resources: **S.endpoint_resources(config, lambda wc: PAS_REVIEWER)
    log: main=f"{LOGS}/pasbench_review_text/review_text.log", calls=f"{LOGS}/pasbench_review_text/review_text.calls.jsonl"
    shell: S.command("pasbench-review-text")


rule pasbench_construct_images:
    input: **S.inputs(config, "pasbench-construct-images", **PAS_KNOWLEDGE_IN)
    output: **S.outputs(config, "pasbench-construct-images")
    params: io=S.io,
            cfg=PD.model_hash(config, PAS_IMAGES.get("prompt_model") or PAS_GEN, PAS_IMAGES["model"], PAS_IMAGES.get("check_model")), construct=PAS_CONSTRUCT_CFG, images=S.section_hash(PAS_IMAGES)
    resources: **S.endpoint_resources(config, lambda wc: PAS_IMAGES["model"] or PAS_GEN)
    log: main=f"{LOGS}/pasbench_construct_images/construct_images.log", calls=f"{LOGS}/pasbench_construct_images/construct_images.calls.jsonl"
    shell: S.command("pasbench-construct-images")
