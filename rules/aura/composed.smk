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
    input: **S.inputs(config, "composed-variations")
    output: **S.outputs(config, "composed-variations")
    params:
        io=S.io, cfg=S.model_hash(config, config["aura"]["roles"]["generator"]), pairs=S.section_hash(COMPOSED["pairs"]),
        tries=config["aura"]["construct"]["rule_tries"],
    resources: **S.endpoint_resources(config, lambda wc: config["aura"]["roles"]["generator"])
    log: main=f"{LOGS}/composed_variations/composed_variations.log", calls=f"{LOGS}/composed_variations/composed_variations.calls.jsonl"
    shell: S.command("composed-variations")


rule composed_review:
    input: **S.inputs(config, "composed-review")
    output: **S.outputs(config, "composed-review")
    params: io=S.io, cfg=lambda wc: S.model_hash(config, wc.reviewer)
    resources: **S.endpoint_resources(config, lambda wc: wc.reviewer)
    log: main=f"{LOGS}/composed_review/{{reviewer}}.log", calls=f"{LOGS}/composed_review/{{reviewer}}.calls.jsonl"
    shell: S.command("composed-review", model="{wildcards.reviewer}")


rule composed_classify:
    input: **S.inputs(config, "composed-classify", reviews=expand(L["composed_review"], reviewer=COMPOSED_REVIEWERS))
    output: **S.outputs(config, "composed-classify")
    params:
        io=S.io, cfg=S.model_hash(config, config["aura"]["roles"]["classifier"]),
        reviewers=S.section_hash(COMPOSED_REVIEWERS), tries=config["aura"]["construct"]["rule_tries"],
    resources: **S.endpoint_resources(config, lambda wc: config["aura"]["roles"]["classifier"])
    log: main=f"{LOGS}/composed_classify/composed_classify.log", calls=f"{LOGS}/composed_classify/composed_classify.calls.jsonl"
    shell: S.command("composed-classify")


rule composed_rollout:
    input: **S.inputs(config, "rollout", dataset=L["composed_dataset"], prompts=["rollout_react"])
    output: **S.outputs(config, "rollout", rollouts=L["composed_rollouts"])
    params: io=S.io, cfg=lambda wc: S.model_hash(config, wc.model)
    resources: **S.endpoint_resources(config, lambda wc: wc.model)
    log: main=f"{LOGS}/composed_rollout/{{model}}.log", calls=f"{LOGS}/composed_rollout/{{model}}.calls.jsonl"
    shell: S.command("rollout", model="{wildcards.model}")


rule composed_judge:
    input: **S.inputs(config, "judge", dataset=L["composed_dataset"], rollouts=L["composed_rollouts"])
    output: **S.outputs(config, "judge", judgments=L["composed_judgments"])
    params: io=S.io, cfg=lambda wc: S.model_hash(config, wc.judge)
    resources: **S.endpoint_resources(config, lambda wc: wc.judge)
    log: main=f"{LOGS}/composed_judge/{{model}}/{{judge}}.log", calls=f"{LOGS}/composed_judge/{{model}}/{{judge}}.calls.jsonl"
    shell: S.command("judge", model="{wildcards.model}", judge="{wildcards.judge}")


rule composed_panel:
    localrule: True   # no model call: on a cluster it runs in the main Snakemake process
    input:
        **S.inputs(config, "panel", rollouts=L["composed_rollouts"],
                   judgments=lambda wc: expand(L["composed_judgments"], model=wc.model, judge=COMPOSED_JUDGES)),
    output: **S.outputs(config, "panel", panel=L["composed_panel"])
    params: io=S.io, judges=S.section_hash(COMPOSED_JUDGES)
    log: f"{LOGS}/composed_panel/{{model}}.log"
    shell: S.command("panel", model="{wildcards.model}")


rule composed_stats:
    localrule: True   # no model call: on a cluster it runs in the main Snakemake process
    input: **S.inputs(config, "composed-stats", panel=expand(L["composed_panel"], model=COMPOSED_MODELS))
    output: **S.outputs(config, "composed-stats")
    params:
        io=S.io, pairs=S.section_hash(COMPOSED["pairs"]),
        resamples=config["aura"]["stats"]["bootstrap_resamples"],
    log: f"{LOGS}/composed_stats/composed_stats.log"
    shell: S.command("composed-stats")
