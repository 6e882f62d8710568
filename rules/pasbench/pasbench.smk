# PaSBench (issue 10; manifest: src/aura/families/pasbench/__init__.py): items -> per evaluated model:
# proactive responses (N samples) -> judgments -> knowledge / reactive / propose-then-verify probes ->
# one stats job -> the figures and tables (rendered by the Snakefile's render rules). Construction of new
# sets runs beside it when pasbench.construct.enabled. Rules hold no logic: each calls
# `python -m aura pasbench-<stage>` with its inputs and outputs, logs under logs/<rule>/.
import aura.families.pasbench as PB

# The section's own checks (models by name) ran when the config was read (the manifest's `check`).
PAS = config["pasbench"]
PAS_MODELS = PB.evaluated(config)
PAS_JUDGE = PAS["judge"]
PAS_CONSTRUCT = PAS["construct"]
PAS_MODEL_RE = "|".join(map(re.escape, config["models"]))
PAS_PROMPTS = {
    "respond": [S.prompt_file("proactive_text"), S.prompt_file("proactive_image")],
    "judge": [S.prompt_file("risk_judge")],
    "knowledge": [S.prompt_file("knowledge_probe"), S.prompt_file("knowledge_judge")],
    "reactive": [S.prompt_file(p) for p in ("reactive_text", "reactive_image", "risk_judge")],
    "verify": [S.prompt_file("verify_text"), S.prompt_file("verify_image")],
}


def pas_model_hash(*models):
    return S.model_hash(config, *[m for m in models if m])


# ---- data: a folder in the upstream layout, or a pinned download of one --------------------------------
PAS_DOWNLOAD = PAS["data"].get("download") if (PAS["data"].get("download") or {}).get("enabled", True) else None
PAS_DATA = PAS_DOWNLOAD["dest"] if PAS_DOWNLOAD else PAS["data"].get("path")


def pas_data_files():
    """The data folder's files (JSON files, source.txt, images), so an edited file reruns the items job;
    the folder itself when it does not exist yet (the items job then says what is missing); and the sub-image
    count file (pasbench.data.sub_images) when it exists (when it does not, the items job says how to make it)."""
    counts = [PAS["data"]["sub_images"]] if PAS["data"].get("sub_images") and Path(PAS["data"]["sub_images"]).is_file() else []
    if PAS_DOWNLOAD:
        return [f"{PAS_DOWNLOAD['dest']}/.fetched.json", *counts]
    folder = Path(PAS_DATA)
    if not folder.is_dir():
        return [PAS_DATA]
    names = ("text_eval_hugging.json", "multi_modal_eval_hugging.json", "severity.json", "source.txt")
    images = Path(PAS["data"]["images"]) if PAS["data"].get("images") else folder / "images"
    return [str(folder / n) for n in names if (folder / n).exists()] + sorted(str(p) for p in images.glob("*") if p.is_file()) + counts


def pas_own_params(model):
    """A model's pasbench.model_params entry as a hash suffix of its jobs' params ("" when it has none, so the
    other models' jobs keep their params and do not rerun)."""
    own = PAS.get("model_params") or {}
    return "+" + S.section_hash(own[model]) if model in own else ""


if PAS_DOWNLOAD:
    rule pasbench_fetch:
        localrule: True   # no model call: on a cluster it runs in the main Snakemake process
        output: marker=f"{PAS_DOWNLOAD['dest']}/.fetched.json"
        params: url=PAS_DOWNLOAD["url"]
        log: f"{LOGS}/pasbench_fetch/pasbench_fetch.log"
        shell: "{AURA} pasbench-fetch --configfile {CONFIGFILE} 2> {log}"


rule pasbench_items:
    localrule: True   # no model call: on a cluster it runs in the main Snakemake process
    input: pas_data_files()
    output: pas_items=L["pasbench_items"]
    params: data_dir=PAS_DATA, cfg=S.section_hash(PAS["data"], PAS["max_items"])
    log: f"{LOGS}/pasbench_items/pasbench_items.log"
    shell: "{AURA} pasbench-items --configfile {CONFIGFILE} --in data_dir={params.data_dir} --out items={output.pas_items} 2> {log}"


# ---- per evaluated model -----------------------------------------------------------------------------
rule pasbench_respond:
    input: pas_items=L["pasbench_items"], prompts=PAS_PROMPTS["respond"]
    output: responses=L["pasbench_responses"]
    wildcard_constraints: model=PAS_MODEL_RE
    # sampling: N (pasbench.samples, plus the model's pasbench.samples_by_model entry when it has one) and params
    params: cfg=lambda wc: pas_model_hash(wc.model), sampling=lambda wc: S.section_hash(PAS["samples"], PAS["params"], *PB.samples_entry(config, wc.model)) + pas_own_params(wc.model)
    resources: **S.endpoint_resources(config, lambda wc: wc.model)
    log: main=f"{LOGS}/pasbench_respond/{{model}}.log", calls=f"{LOGS}/pasbench_respond/{{model}}.calls.jsonl"
    shell: "{AURA} pasbench-respond --configfile {CONFIGFILE} --model {wildcards.model} --in items={input.pas_items} --out responses={output.responses} --calls-log {log.calls} 2> {log.main}"


rule pasbench_judge:
    input: pas_items=L["pasbench_items"], responses=L["pasbench_responses"], prompts=PAS_PROMPTS["judge"]
    output: judgments=L["pasbench_judgments"]
    wildcard_constraints: model=PAS_MODEL_RE
    params: cfg=pas_model_hash(PAS_JUDGE), judge=PAS_JUDGE, reads=PAS.get("judge_reads", "answer")
    resources: **S.endpoint_resources(config, lambda wc: PAS_JUDGE)
    log: main=f"{LOGS}/pasbench_judge/{{model}}.log", calls=f"{LOGS}/pasbench_judge/{{model}}.calls.jsonl"
    shell: "{AURA} pasbench-judge --configfile {CONFIGFILE} --model {wildcards.model} --judge {params.judge} --in items={input.pas_items} --in responses={input.responses} --out judgments={output.judgments} --calls-log {log.calls} 2> {log.main}"


# The knowledge probe asks the evaluated model (A/B/C + why), then the judge grades each A's explanation in
# the same job (as the reactive probe: one job per model, both endpoints' calls cached).
rule pasbench_knowledge:
    input: pas_items=L["pasbench_items"], prompts=PAS_PROMPTS["knowledge"]
    output: knowledge=L["pasbench_knowledge"]
    wildcard_constraints: model=PAS_MODEL_RE
    params: cfg=lambda wc: pas_model_hash(wc.model, PAS_JUDGE) + pas_own_params(wc.model), judge=PAS_JUDGE
    resources: **S.endpoint_resources(config, lambda wc: wc.model)
    log: main=f"{LOGS}/pasbench_knowledge/{{model}}.log", calls=f"{LOGS}/pasbench_knowledge/{{model}}.calls.jsonl"
    shell: "{AURA} pasbench-knowledge --configfile {CONFIGFILE} --model {wildcards.model} --judge {params.judge} --in items={input.pas_items} --out knowledge={output.knowledge} --calls-log {log.calls} 2> {log.main}"


# The reactive probe calls the evaluated model and then the judge: one job holds both endpoints' resource
# (a model and its judge on one endpoint: 1 unit of it).
rule pasbench_reactive:
    input: pas_items=L["pasbench_items"], judgments=L["pasbench_judgments"], prompts=PAS_PROMPTS["reactive"]
    output: reactive=L["pasbench_reactive"]
    wildcard_constraints: model=PAS_MODEL_RE
    params: cfg=lambda wc: pas_model_hash(wc.model, PAS_JUDGE), sampling=lambda wc: S.section_hash(PAS["params"]) + pas_own_params(wc.model), judge=PAS_JUDGE
    resources: **S.endpoint_resources(config, lambda wc: wc.model)
    log: main=f"{LOGS}/pasbench_reactive/{{model}}.log", calls=f"{LOGS}/pasbench_reactive/{{model}}.calls.jsonl"
    shell: "{AURA} pasbench-reactive --configfile {CONFIGFILE} --model {wildcards.model} --judge {params.judge} --in items={input.pas_items} --in judgments={input.judgments} --out reactive={output.reactive} --calls-log {log.calls} 2> {log.main}"


rule pasbench_verify:
    input: pas_items=L["pasbench_items"], responses=L["pasbench_responses"], prompts=PAS_PROMPTS["verify"]
    output: verified=L["pasbench_verified"]
    wildcard_constraints: model=PAS_MODEL_RE
    params: cfg=lambda wc: pas_model_hash(wc.model) + pas_own_params(wc.model)
    resources: **S.endpoint_resources(config, lambda wc: wc.model)
    log: main=f"{LOGS}/pasbench_verify/{{model}}.log", calls=f"{LOGS}/pasbench_verify/{{model}}.calls.jsonl"
    shell: "{AURA} pasbench-verify --configfile {CONFIGFILE} --model {wildcards.model} --in items={input.pas_items} --in responses={input.responses} --out verified={output.verified} --calls-log {log.calls} 2> {log.main}"


# ---- statistics over every evaluated model: the CSVs the notebooks read ---------------------------------
# per-model files as --in judgments_0=... knowledge_0=... (a probe's files only when it is on)
PAS_STATS_IN = {name: expand(L[f"pasbench_{name}"], model=PAS_MODELS)
                for name in ("judgments", *[n for n, switch in PB.PROBES.items() if PB.probe_on(config, switch)])}


rule pasbench_stats:
    localrule: True   # no model call: on a cluster it runs in the main Snakemake process
    input: pas_items=L["pasbench_items"], **PAS_STATS_IN
    output: **{name: L[f"pasbench_stats_{name}"] for name in PB.stats_outputs(config)}
    params: ins=S.in_args(PAS_STATS_IN), outs=lambda wc, output: S.out_args(output), cfg=S.section_hash(PAS["bootstrap"])
    log: f"{LOGS}/pasbench_stats/pasbench_stats.log"
    shell: "{AURA} pasbench-stats --configfile {CONFIGFILE} --in items={input.pas_items} {params.ins} {params.outs} 2> {log}"


# ---- construction of new PaSBench-style items (paper §3.2) ---------------------------------------------
PAS_GEN, PAS_REVIEWER = PAS_CONSTRUCT["generator"], PAS_CONSTRUCT["reviewer"]
PAS_IMAGES = PAS_CONSTRUCT["images"]
# knowledge points from the items file (an integer) or listed in the config (then no items input)
PAS_KNOWLEDGE_IN = {"items": L["pasbench_items"]} if isinstance(PAS_CONSTRUCT["knowledge_points"], int) else {}
PAS_KNOWLEDGE_ARGS = S.in_args(PAS_KNOWLEDGE_IN)
PAS_CONSTRUCT_CFG = S.section_hash({k: v for k, v in PAS_CONSTRUCT.items() if k not in ("images", "overrides", "reviewer", "enabled")})


rule pasbench_construct_text:
    input: **{f"pas_{k}": v for k, v in PAS_KNOWLEDGE_IN.items()}, prompts=[S.prompt_file("construct_profile"), S.prompt_file("construct_log")]
    output: drafts=L["pasbench_construct_text_drafts"]
    params: ins=PAS_KNOWLEDGE_ARGS, cfg=pas_model_hash(PAS_GEN), construct=PAS_CONSTRUCT_CFG
    resources: **S.endpoint_resources(config, lambda wc: PAS_GEN)
    log: main=f"{LOGS}/pasbench_construct_text/construct_text.log", calls=f"{LOGS}/pasbench_construct_text/construct_text.calls.jsonl"
    shell: "{AURA} pasbench-construct-text --configfile {CONFIGFILE} {params.ins} --out drafts={output.drafts} --calls-log {log.calls} 2> {log.main}"


rule pasbench_review_text:
    input:
        drafts=L["pasbench_construct_text_drafts"], prompt=S.prompt_file("construct_review"),
        marker=[PAS_CONSTRUCT["overrides"]] if PAS_CONSTRUCT["overrides"] else [],
    output:
        constructed=L["pasbench_constructed_text"], reviews=L["pasbench_construct_text_reviews"],
        exclusions=L["pasbench_construct_text_exclusions"],
    params: cfg=pas_model_hash(PAS_REVIEWER)
    resources: **S.endpoint_resources(config, lambda wc: PAS_REVIEWER)
    log: main=f"{LOGS}/pasbench_review_text/review_text.log", calls=f"{LOGS}/pasbench_review_text/review_text.calls.jsonl"
    shell: "{AURA} pasbench-review-text --configfile {CONFIGFILE} --in drafts={input.drafts} --out items={output.constructed} --out reviews={output.reviews} --out exclusions={output.exclusions} --calls-log {log.calls} 2> {log.main}"


rule pasbench_construct_images:
    input: **{f"pas_{k}": v for k, v in PAS_KNOWLEDGE_IN.items()}, prompt=S.prompt_file("construct_image_prompts"),
           check_prompt=S.prompt_file("construct_image_check")
    output:
        constructed=L["pasbench_constructed_images"], drafts=L["pasbench_construct_image_drafts"],
        exclusions=L["pasbench_construct_image_exclusions"],
    params: ins=PAS_KNOWLEDGE_ARGS,
            cfg=pas_model_hash(PAS_IMAGES.get("prompt_model") or PAS_GEN, PAS_IMAGES["model"], PAS_IMAGES.get("check_model")), construct=PAS_CONSTRUCT_CFG, images=S.section_hash(PAS_IMAGES)
    resources: **S.endpoint_resources(config, lambda wc: PAS_IMAGES["model"] or PAS_GEN)
    log: main=f"{LOGS}/pasbench_construct_images/construct_images.log", calls=f"{LOGS}/pasbench_construct_images/construct_images.calls.jsonl"
    shell: "{AURA} pasbench-construct-images --configfile {CONFIGFILE} {params.ins} --out items={output.constructed} --out drafts={output.drafts} --out exclusions={output.exclusions} --calls-log {log.calls} 2> {log.main}"
