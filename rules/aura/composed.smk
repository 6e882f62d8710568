# Composed mechanisms (AURA future work; config aura.construct.composed, off by default): for each configured
# pair of RS dimensions, the prefixes where P2 found both groundable get the single variations and the
# composed one (composed_variations), reviews x3 (composed_review), P7 labels (composed_classify, which
# also writes the experiment's item set), rollouts / judges / panel per evaluated model, and the
# interaction statistics (composed_stats). Separate files: the main dataset and its tables never change.
# (This file is read before construct.smk and evaluate.smk: it names its own globals.)
COMPOSED = config["aura"]["construct"]["composed"]
COMPOSED_MODELS = COMPOSED["models"] or config["aura"]["roles"]["evaluated"]
COMPOSED_REVIEWERS = config["aura"]["roles"]["reviewers"]
COMPOSED_JUDGES = config["aura"]["roles"]["judges"]


rule composed_variations:
    input:
        seeds=L["seeds"], prefixes=L["prefixes"], relevance=L["relevance"], dims=S.prompt_file("dimensions"),
        prompts=[S.prompt_file("p3_harm_intensity_variation"), S.prompt_file("p4_contextual_variation"),
                 S.prompt_file("composed_variation")],
    output: variations=L["composed_variations"]
    params:
        cfg=S.model_hash(config, config["aura"]["roles"]["generator"]), pairs=S.section_hash(COMPOSED["pairs"]),
        tries=config["aura"]["construct"]["rule_tries"],
    resources: **S.endpoint_resources(config, lambda wc: config["aura"]["roles"]["generator"])
    log: main=f"{LOGS}/composed_variations/composed_variations.log", calls=f"{LOGS}/composed_variations/composed_variations.calls.jsonl"
    shell: "{AURA} composed-variations --configfile {CONFIGFILE} --in seeds={input.seeds} --in prefixes={input.prefixes} --in relevance={input.relevance} --out variations={output.variations} --calls-log {log.calls} 2> {log.main}"


rule composed_review:
    input:
        seeds=L["seeds"], prefixes=L["prefixes"], variations=L["composed_variations"], dims=S.prompt_file("dimensions"),
        prompts=[S.prompt_file("p5_harm_intensity_review"), S.prompt_file("p6_contextual_review"),
                 S.prompt_file("composed_review")],
    output: review=L["composed_review"]
    params: cfg=lambda wc: S.model_hash(config, wc.reviewer)
    resources: **S.endpoint_resources(config, lambda wc: wc.reviewer)
    log: main=f"{LOGS}/composed_review/{{reviewer}}.log", calls=f"{LOGS}/composed_review/{{reviewer}}.calls.jsonl"
    shell: "{AURA} composed-review --configfile {CONFIGFILE} --model {wildcards.reviewer} --in seeds={input.seeds} --in prefixes={input.prefixes} --in variations={input.variations} --out review={output.review} --calls-log {log.calls} 2> {log.main}"


rule composed_classify:
    input:
        seeds=L["seeds"], prefixes=L["prefixes"], variations=L["composed_variations"],
        reviews=expand(L["composed_review"], reviewer=COMPOSED_REVIEWERS), prompt=S.prompt_file("p7_pair_classification"),
    output: classified=L["composed_classified"], dataset=L["composed_dataset"]
    params:
        ins=lambda wc, input: S.in_args(input), cfg=S.model_hash(config, config["aura"]["roles"]["classifier"]),
        reviewers=S.section_hash(COMPOSED_REVIEWERS), tries=config["aura"]["construct"]["rule_tries"],
    resources: **S.endpoint_resources(config, lambda wc: config["aura"]["roles"]["classifier"])
    log: main=f"{LOGS}/composed_classify/composed_classify.log", calls=f"{LOGS}/composed_classify/composed_classify.calls.jsonl"
    shell: "{AURA} composed-classify --configfile {CONFIGFILE} {params.ins} --out classified={output.classified} --out dataset={output.dataset} --calls-log {log.calls} 2> {log.main}"


rule composed_rollout:
    input: dataset=L["composed_dataset"], prompt=S.prompt_file("rollout_react")
    output: rollouts=L["composed_rollouts"]
    params: cfg=lambda wc: S.model_hash(config, wc.model)
    resources: **S.endpoint_resources(config, lambda wc: wc.model)
    log: main=f"{LOGS}/composed_rollout/{{model}}.log", calls=f"{LOGS}/composed_rollout/{{model}}.calls.jsonl"
    shell: "{AURA} rollout --configfile {CONFIGFILE} --model {wildcards.model} --in dataset={input.dataset} --out rollouts={output.rollouts} --calls-log {log.calls} 2> {log.main}"


rule composed_judge:
    input:
        dataset=L["composed_dataset"], rollouts=L["composed_rollouts"],
        prompts=[S.prompt_file(f"judge_{axis}") for axis in ("detection", "action_type", "safety")],
    output: judgments=L["composed_judgments"]
    params: cfg=lambda wc: S.model_hash(config, wc.judge)
    resources: **S.endpoint_resources(config, lambda wc: wc.judge)
    log: main=f"{LOGS}/composed_judge/{{model}}/{{judge}}.log", calls=f"{LOGS}/composed_judge/{{model}}/{{judge}}.calls.jsonl"
    shell: "{AURA} judge --configfile {CONFIGFILE} --model {wildcards.model} --judge {wildcards.judge} --in dataset={input.dataset} --in rollouts={input.rollouts} --out judgments={output.judgments} --calls-log {log.calls} 2> {log.main}"


rule composed_panel:
    localrule: True   # no model call: on a cluster it runs in the main Snakemake process
    input:
        rollouts=L["composed_rollouts"],
        judgments=lambda wc: expand(L["composed_judgments"], model=wc.model, judge=COMPOSED_JUDGES),
    output: panel=L["composed_panel"]
    params: ins=lambda wc, input: S.in_args(input), judges=S.section_hash(COMPOSED_JUDGES)
    log: f"{LOGS}/composed_panel/{{model}}.log"
    shell: "{AURA} panel --configfile {CONFIGFILE} --model {wildcards.model} {params.ins} --out panel={output.panel} 2> {log}"


rule composed_stats:
    localrule: True   # no model call: on a cluster it runs in the main Snakemake process
    input: dataset=L["composed_dataset"], panel=expand(L["composed_panel"], model=COMPOSED_MODELS)
    output: composed_interaction=L["composed_interaction"]
    params:
        ins=lambda wc, input: S.in_args(input), pairs=S.section_hash(COMPOSED["pairs"]),
        resamples=config["aura"]["stats"]["bootstrap_resamples"],
    log: f"{LOGS}/composed_stats/composed_stats.log"
    shell: "{AURA} composed-stats --configfile {CONFIGFILE} {params.ins} --out composed_interaction={output.composed_interaction} 2> {log}"
