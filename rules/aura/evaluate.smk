# Evaluation (paper §5, Appendix D): rollouts per (model, shard) -> judges per (judge, model,
# shard) -> panel vote per model -> statistics.
import aura.families.aura.dag as A  # the AURA family's DAG helpers
from aura.families.aura.layout import PAPER_STATS

EVALUATED = config["aura"]["roles"]["evaluated"]
JUDGES = config["aura"]["roles"]["judges"]
N_SHARDS = config["aura"]["evaluate"]["shards"]

wildcard_constraints:
    model="|".join(map(re.escape, config["models"])),
    judge="|".join(map(re.escape, config["models"])),
    shard=r"\d+",
    run=r"[1-9]\d*",


rule rollout:
    input: **S.inputs(config, "rollout", prompts=["rollout_react"])
    output: **S.outputs(config, "rollout")
    params: io=S.io, cfg=lambda wc: S.model_hash(config, wc.model)
    resources: **S.endpoint_resources(config, lambda wc: wc.model)
    log: main=f"{LOGS}/rollout/{{model}}/shard{{shard}}.log", calls=f"{LOGS}/rollout/{{model}}/shard{{shard}}.calls.jsonl"
    shell: S.command("rollout", model="{wildcards.model}", shard="{wildcards.shard}/{N_SHARDS}")


rule judge:
    input: **S.inputs(config, "judge")
    output: **S.outputs(config, "judge")
    params: io=S.io, cfg=lambda wc: S.model_hash(config, wc.judge)
    resources: **S.endpoint_resources(config, lambda wc: wc.judge)
    log: main=f"{LOGS}/judge/{{model}}/{{judge}}/shard{{shard}}.log", calls=f"{LOGS}/judge/{{model}}/{{judge}}/shard{{shard}}.calls.jsonl"
    shell: S.command("judge", model="{wildcards.model}", judge="{wildcards.judge}", shard="{wildcards.shard}/{N_SHARDS}")


rule panel:
    localrule: True   # no model call: on a cluster it runs in the main Snakemake process
    input:
        **S.inputs(config, "panel", rollouts=lambda wc: expand(L["rollouts"], model=wc.model, shard=A.shards(config)),
                   judgments=lambda wc: expand(L["judgments"], model=wc.model, judge=JUDGES, shard=A.shards(config))),
    output: **S.outputs(config, "panel")
    params: io=S.io, judges=S.section_hash(JUDGES)
    log: f"{LOGS}/panel/{{model}}.log"
    shell: S.command("panel", model="{wildcards.model}")


rule model_rates:
    localrule: True   # no model call: on a cluster it runs in the main Snakemake process
    input: **S.inputs(config, "model-rates", panel=expand(L["panel"], model=EVALUATED))
    output: **S.outputs(config, "model-rates")
    params: io=S.io
    log: f"{LOGS}/model_rates/model_rates.log"
    shell: S.command("model-rates")


# Label reliability (§6, Appendix F): judge-panel agreement always; Tables 3, 20-22 (human
# reliability, judge-human agreement, per-judge accuracy) when `paths.human_labels` names a CSV of
# human labels; with `aura.roles.validation_judges` those judges label the human-labelled items
# (judge_validation) and give the votes, and Table 23 compares their 3-judge subsets.
HUMAN_LABELS = config["paths"].get("human_labels")
VALIDATION_JUDGES = A.validation_judges(config)


rule judge_validation:
    input:
        **S.inputs(config, "judge", human_labels=HUMAN_LABELS or [],
                   rollouts=lambda wc: expand(L["rollouts"], model=wc.model, shard=A.shards(config)),
                   rerun={"scoring": lambda wc: A.scoring_judgments(config, wc.model, wc.judge)}),
    output: **S.outputs(config, "judge", judgments=L["validation_judgments"])
    params: io=S.io, cfg=lambda wc: S.model_hash(config, wc.judge)
    resources: **S.endpoint_resources(config, lambda wc: wc.judge)
    log: main=f"{LOGS}/judge_validation/{{model}}/{{judge}}.log", calls=f"{LOGS}/judge_validation/{{model}}/{{judge}}.calls.jsonl"
    shell: S.command("judge", model="{wildcards.model}", judge="{wildcards.judge}", options={"only": "human_labels"})


rule reliability:
    localrule: True   # no model call: on a cluster it runs in the main Snakemake process
    input:
        **S.inputs(config, "reliability", panel=expand(L["panel"], model=EVALUATED),
                   **({"human_labels": HUMAN_LABELS} if HUMAN_LABELS else {}), validation=A.validation_judgments(config)),
    output:
        **S.outputs(config, "reliability", only=["judge_reliability", *(["table3", "judge_accuracy"] if HUMAN_LABELS else []),
                                                  *(["ensembles"] if len(VALIDATION_JUDGES) > 3 else [])]),
    params: io=S.io
    log: f"{LOGS}/reliability/reliability.log"
    shell: S.command("reliability")


rule paper_stats:
    localrule: True   # no model call: on a cluster it runs in the main Snakemake process
    input: **S.inputs(config, "paper-stats", panel=expand(L["panel"], model=EVALUATED))
    output: **S.outputs(config, "paper-stats")
    params: io=S.io, cfg=S.section_hash(config["aura"]["stats"])
    log: f"{LOGS}/paper_stats/paper_stats.log"
    shell: S.command("paper-stats")


# Prompt-format sensitivity (Appendix J.4, Table 38): the stratified sample re-run with the
# action-only interface for `aura.evaluate.format_models`, judged on action type and safety.
FORMAT_MODELS = config["aura"]["evaluate"]["format_models"]


rule format_sample:
    localrule: True   # no model call: on a cluster it runs in the main Snakemake process
    input: **S.inputs(config, "format-sample")
    output: **S.outputs(config, "format-sample")
    params: io=S.io, size=config["aura"]["evaluate"]["format_sample_size"], seed=config["seed"]
    log: f"{LOGS}/format_sample/format_sample.log"
    shell: S.command("format-sample")


rule rollout_action_only:
    input: **S.inputs(config, "rollout", dataset=L["format_sample"], prompts=["rollout_action_only"])
    output: **S.outputs(config, "rollout", rollouts=L["format_rollouts"])
    params: io=S.io, cfg=lambda wc: S.model_hash(config, wc.model)
    resources: **S.endpoint_resources(config, lambda wc: wc.model)
    log: main=f"{LOGS}/rollout_action_only/{{model}}.log", calls=f"{LOGS}/rollout_action_only/{{model}}.calls.jsonl"
    shell: S.command("rollout", model="{wildcards.model}", options={"format": "action_only"})


rule judge_action_only:
    input: **S.inputs(config, "judge", dataset=L["format_sample"], rollouts=L["format_rollouts"], prompts=["judge_action_type", "judge_safety"])
    output: **S.outputs(config, "judge", judgments=L["format_judgments"])
    params: io=S.io, cfg=lambda wc: S.model_hash(config, wc.judge)
    resources: **S.endpoint_resources(config, lambda wc: wc.judge)
    log: main=f"{LOGS}/judge_action_only/{{model}}/{{judge}}.log", calls=f"{LOGS}/judge_action_only/{{model}}/{{judge}}.calls.jsonl"
    shell: S.command("judge", model="{wildcards.model}", judge="{wildcards.judge}", options={"axes": "action_type,safety"})


rule panel_action_only:
    localrule: True   # no model call: on a cluster it runs in the main Snakemake process
    input: **S.inputs(config, "panel", rollouts=L["format_rollouts"], judgments=lambda wc: expand(L["format_judgments"], model=wc.model, judge=JUDGES))
    output: **S.outputs(config, "panel", panel=L["format_panel"])
    params: io=S.io, judges=S.section_hash(JUDGES)
    log: f"{LOGS}/panel_action_only/{{model}}.log"
    shell: S.command("panel", model="{wildcards.model}")


rule format_stats:
    localrule: True   # no model call: on a cluster it runs in the main Snakemake process
    input: **S.inputs(config, "format-stats", react=expand(L["panel"], model=FORMAT_MODELS), action_only=expand(L["format_panel"], model=FORMAT_MODELS))
    output: **S.outputs(config, "format-stats")
    params: io=S.io
    log: f"{LOGS}/format_stats/format_stats.log"
    shell: S.command("format-stats")


# Leave-one-vendor-out replacement (Appendix F.4, Table 24): for each evaluated model that shares a
# vendor with a panel judge, the replacement judge re-judges its rollouts on a common stratified
# sample; the stats stage swaps it in for the same-vendor judge and compares Safe rates.
VENDOR_OVERLAP = A.vendor_overlaps(config)
REPLACEMENT = config["aura"]["roles"].get("replacement_judge")


rule vendor_sample:
    localrule: True   # no model call: on a cluster it runs in the main Snakemake process
    input: **S.inputs(config, "format-sample")
    output: **S.outputs(config, "format-sample", sample=L["vendor_sample"])
    params: io=S.io, size=config["aura"]["evaluate"]["vendor_overlap_sample_size"], seed=config["seed"]
    log: f"{LOGS}/vendor_sample/vendor_sample.log"
    shell: S.command("format-sample", options={"size_key": "vendor_overlap_sample_size"})


rule judge_replacement:
    input: **S.inputs(config, "judge", dataset=L["vendor_sample"], prompts=["judge_action_type", "judge_safety"])
    output: **S.outputs(config, "judge", judgments=L["replacement_judgments"])
    params: io=S.io, cfg=lambda wc: S.model_hash(config, REPLACEMENT)
    resources: **S.endpoint_resources(config, lambda wc: REPLACEMENT)
    log: main=f"{LOGS}/judge_replacement/{{model}}/shard{{shard}}.log", calls=f"{LOGS}/judge_replacement/{{model}}/shard{{shard}}.calls.jsonl"
    shell: S.command("judge", model="{wildcards.model}", judge="{REPLACEMENT}", shard="{wildcards.shard}/{N_SHARDS}", options={"axes": "action_type,safety", "only": "dataset_items"})


rule vendor_overlap_stats:
    localrule: True   # no model call: on a cluster it runs in the main Snakemake process
    input:
        **S.inputs(config, "vendor-overlap", panel=expand(L["panel"], model=list(VENDOR_OVERLAP)),
                   judgments=expand(L["replacement_judgments"], model=list(VENDOR_OVERLAP), shard=A.shards(config))),
    output: **S.outputs(config, "vendor-overlap")
    params: io=S.io, cfg=S.section_hash(config["aura"]["stats"], VENDOR_OVERLAP, REPLACEMENT)
    log: f"{LOGS}/vendor_overlap_stats/vendor_overlap_stats.log"
    shell: S.command("vendor-overlap")


# Intra-judge consistency (Appendix F.5, Table 25): every panel judge labels the consistency
# models' rollouts `consistency_runs` times; run 0 is the main judging. The sample is the paper's
# calibration subset (the human-labelled items in the dataset) when paths.human_labels is set, else
# a stratified draw; the table counts only the labelled (model, item, axis) units.


rule consistency_sample:
    localrule: True   # no model call: on a cluster it runs in the main Snakemake process
    input: **S.inputs(config, "consistency", dataset=L["dataset"], human_labels=HUMAN_LABELS or [])
    output: **S.outputs(config, "consistency", only=["sample"])
    params: io=S.io, size=config["aura"]["evaluate"]["consistency_sample_size"], seed=config["seed"], models=S.section_hash(config["aura"]["evaluate"]["consistency_models"])
    log: f"{LOGS}/consistency_sample/consistency_sample.log"
    shell: S.command("consistency")


rule judge_repeat:
    input: **S.inputs(config, "judge", dataset=L["consistency_sample"])
    output: **S.outputs(config, "judge", judgments=L["repeat_judgments"])
    params: io=S.io, cfg=lambda wc: S.model_hash(config, wc.judge)
    resources: **S.endpoint_resources(config, lambda wc: wc.judge)
    log: main=f"{LOGS}/judge_repeat/{{model}}/{{judge}}/run{{run}}/shard{{shard}}.log", calls=f"{LOGS}/judge_repeat/{{model}}/{{judge}}/run{{run}}/shard{{shard}}.calls.jsonl"
    shell: S.command("judge", model="{wildcards.model}", judge="{wildcards.judge}", shard="{wildcards.shard}/{N_SHARDS}", options={"run": "{wildcards.run}", "only": "dataset_items"})


rule consistency_stats:
    localrule: True   # no model call: on a cluster it runs in the main Snakemake process
    input: **S.inputs(config, "consistency", sample=L["consistency_sample"], judgments=A.consistency_judgments(config))
    output: **S.outputs(config, "consistency", only=["table25"])
    params: io=S.io, runs=config["aura"]["evaluate"]["consistency_runs"]
    log: f"{LOGS}/consistency_stats/consistency_stats.log"
    shell: S.command("consistency")
