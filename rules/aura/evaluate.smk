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
    input: dataset=L["dataset"], prompt=S.prompt_file("rollout_react")
    output: rollouts=L["rollouts"]
    params: cfg=lambda wc: S.model_hash(config, wc.model)
    resources: **S.endpoint_resources(config, lambda wc: wc.model)
    log: main=f"{LOGS}/rollout/{{model}}/shard{{shard}}.log", calls=f"{LOGS}/rollout/{{model}}/shard{{shard}}.calls.jsonl"
    shell: "{AURA} rollout --configfile {CONFIGFILE} --model {wildcards.model} --shard {wildcards.shard}/{N_SHARDS} --in dataset={input.dataset} --out rollouts={output.rollouts} --calls-log {log.calls} 2> {log.main}"


rule judge:
    input:
        dataset=L["dataset"],
        rollouts=L["rollouts"],
        prompts=[S.prompt_file(f"judge_{axis}") for axis in ("detection", "action_type", "safety")],
    output: judgments=L["judgments"]
    params: cfg=lambda wc: S.model_hash(config, wc.judge)
    resources: **S.endpoint_resources(config, lambda wc: wc.judge)
    log: main=f"{LOGS}/judge/{{model}}/{{judge}}/shard{{shard}}.log", calls=f"{LOGS}/judge/{{model}}/{{judge}}/shard{{shard}}.calls.jsonl"
    shell: "{AURA} judge --configfile {CONFIGFILE} --model {wildcards.model} --judge {wildcards.judge} --shard {wildcards.shard}/{N_SHARDS} --in dataset={input.dataset} --in rollouts={input.rollouts} --out judgments={output.judgments} --calls-log {log.calls} 2> {log.main}"


rule panel:
    localrule: True   # no model call: on a cluster it runs in the main Snakemake process
    input:
        rollouts=lambda wc: expand(L["rollouts"], model=wc.model, shard=A.shards(config)),
        judgments=lambda wc: expand(L["judgments"], model=wc.model, judge=JUDGES, shard=A.shards(config)),
    output: panel=L["panel"]
    params: ins=lambda wc, input: S.in_args(input), judges=S.section_hash(JUDGES)
    log: f"{LOGS}/panel/{{model}}.log"
    shell: "{AURA} panel --configfile {CONFIGFILE} --model {wildcards.model} {params.ins} --out panel={output.panel} 2> {log}"


rule model_rates:
    localrule: True   # no model call: on a cluster it runs in the main Snakemake process
    input: dataset=L["dataset"], panel=expand(L["panel"], model=EVALUATED)
    output: model_rates=L["model_rates"]
    params: ins=lambda wc, input: S.in_args(input)
    log: f"{LOGS}/model_rates/model_rates.log"
    shell: "{AURA} model-rates --configfile {CONFIGFILE} {params.ins} --out model_rates={output.model_rates} 2> {log}"


# Label reliability (§6, Appendix F): judge-panel agreement always; Tables 3, 20-22 (human
# reliability, judge-human agreement, per-judge accuracy) when `paths.human_labels` names a CSV of
# human labels; with `aura.roles.validation_judges` those judges label the human-labelled items
# (judge_validation) and give the votes, and Table 23 compares their 3-judge subsets.
HUMAN_LABELS = config["paths"].get("human_labels")
VALIDATION_JUDGES = A.validation_judges(config)


rule judge_validation:
    input:
        dataset=L["dataset"], human_labels=HUMAN_LABELS or [],
        rollouts=lambda wc: expand(L["rollouts"], model=wc.model, shard=A.shards(config)),
        prompts=[S.prompt_file(f"judge_{axis}") for axis in ("detection", "action_type", "safety")],
        marker=lambda wc: A.scoring_judgments(config, wc.model, wc.judge),
    output: judgments=L["validation_judgments"]
    params: ins=lambda wc, input: S.in_args(input), cfg=lambda wc: S.model_hash(config, wc.judge)
    resources: **S.endpoint_resources(config, lambda wc: wc.judge)
    log: main=f"{LOGS}/judge_validation/{{model}}/{{judge}}.log", calls=f"{LOGS}/judge_validation/{{model}}/{{judge}}.calls.jsonl"
    shell: "{AURA} judge --configfile {CONFIGFILE} --model {wildcards.model} --judge {wildcards.judge} --option only=human_labels {params.ins} --out judgments={output.judgments} --calls-log {log.calls} 2> {log.main}"


rule reliability:
    localrule: True   # no model call: on a cluster it runs in the main Snakemake process
    input:
        panel=expand(L["panel"], model=EVALUATED),
        **({"human_labels": HUMAN_LABELS} if HUMAN_LABELS else {}),
        validation=A.validation_judgments(config),
    output:
        judge_reliability=L["judge_reliability"],
        **({"table3": L["table3_human_validation"], "judge_accuracy": L["table21_22_judge_accuracy"]} if HUMAN_LABELS else {}),
        **({"ensembles": L["table23_ensembles"]} if len(VALIDATION_JUDGES) > 3 else {}),
    params: ins=lambda wc, input: S.in_args(input), outs=lambda wc, output: S.out_args(output)
    log: f"{LOGS}/reliability/reliability.log"
    shell: "{AURA} reliability --configfile {CONFIGFILE} {params.ins} {params.outs} 2> {log}"


rule paper_stats:
    localrule: True   # no model call: on a cluster it runs in the main Snakemake process
    input: dataset=L["dataset"], panel=expand(L["panel"], model=EVALUATED)
    output: **{name: L[name] for name in PAPER_STATS}
    params: ins=lambda wc, input: S.in_args(input), outs=lambda wc, output: S.out_args(output), cfg=S.section_hash(config["aura"]["stats"])
    log: f"{LOGS}/paper_stats/paper_stats.log"
    shell: "{AURA} paper-stats --configfile {CONFIGFILE} {params.ins} {params.outs} 2> {log}"


# Prompt-format sensitivity (Appendix J.4, Table 38): the stratified sample re-run with the
# action-only interface for `aura.evaluate.format_models`, judged on action type and safety.
FORMAT_MODELS = config["aura"]["evaluate"]["format_models"]


rule format_sample:
    localrule: True   # no model call: on a cluster it runs in the main Snakemake process
    input: dataset=L["dataset"]
    output: sample=L["format_sample"]
    params: size=config["aura"]["evaluate"]["format_sample_size"], seed=config["seed"]
    log: f"{LOGS}/format_sample/format_sample.log"
    shell: "{AURA} format-sample --configfile {CONFIGFILE} --in dataset={input.dataset} --out sample={output.sample} 2> {log}"


rule rollout_action_only:
    input: dataset=L["format_sample"], prompt=S.prompt_file("rollout_action_only")
    output: rollouts=L["format_rollouts"]
    params: cfg=lambda wc: S.model_hash(config, wc.model)
    resources: **S.endpoint_resources(config, lambda wc: wc.model)
    log: main=f"{LOGS}/rollout_action_only/{{model}}.log", calls=f"{LOGS}/rollout_action_only/{{model}}.calls.jsonl"
    shell: "{AURA} rollout --configfile {CONFIGFILE} --model {wildcards.model} --option format=action_only --in dataset={input.dataset} --out rollouts={output.rollouts} --calls-log {log.calls} 2> {log.main}"


rule judge_action_only:
    input:
        dataset=L["format_sample"], rollouts=L["format_rollouts"],
        prompts=[S.prompt_file(f"judge_{axis}") for axis in ("action_type", "safety")],
    output: judgments=L["format_judgments"]
    params: cfg=lambda wc: S.model_hash(config, wc.judge)
    resources: **S.endpoint_resources(config, lambda wc: wc.judge)
    log: main=f"{LOGS}/judge_action_only/{{model}}/{{judge}}.log", calls=f"{LOGS}/judge_action_only/{{model}}/{{judge}}.calls.jsonl"
    shell: "{AURA} judge --configfile {CONFIGFILE} --model {wildcards.model} --judge {wildcards.judge} --option axes=action_type,safety --in dataset={input.dataset} --in rollouts={input.rollouts} --out judgments={output.judgments} --calls-log {log.calls} 2> {log.main}"


rule panel_action_only:
    localrule: True   # no model call: on a cluster it runs in the main Snakemake process
    input:
        rollouts=L["format_rollouts"],
        judgments=lambda wc: expand(L["format_judgments"], model=wc.model, judge=JUDGES),
    output: panel=L["format_panel"]
    params: ins=lambda wc, input: S.in_args(input), judges=S.section_hash(JUDGES)
    log: f"{LOGS}/panel_action_only/{{model}}.log"
    shell: "{AURA} panel --configfile {CONFIGFILE} --model {wildcards.model} {params.ins} --out panel={output.panel} 2> {log}"


rule format_stats:
    localrule: True   # no model call: on a cluster it runs in the main Snakemake process
    input:
        sample=L["format_sample"],
        react=expand(L["panel"], model=FORMAT_MODELS),
        action_only=expand(L["format_panel"], model=FORMAT_MODELS),
    output: table38=L["table38_prompt_format"]
    params: ins=lambda wc, input: S.in_args(input)
    log: f"{LOGS}/format_stats/format_stats.log"
    shell: "{AURA} format-stats --configfile {CONFIGFILE} {params.ins} --out table38={output.table38} 2> {log}"


# Leave-one-vendor-out replacement (Appendix F.4, Table 24): for each evaluated model that shares a
# vendor with a panel judge, the replacement judge re-judges its rollouts on a common stratified
# sample; the stats stage swaps it in for the same-vendor judge and compares Safe rates.
VENDOR_OVERLAP = A.vendor_overlaps(config)
REPLACEMENT = config["aura"]["roles"].get("replacement_judge")


rule vendor_sample:
    localrule: True   # no model call: on a cluster it runs in the main Snakemake process
    input: dataset=L["dataset"]
    output: sample=L["vendor_sample"]
    params: size=config["aura"]["evaluate"]["vendor_overlap_sample_size"], seed=config["seed"]
    log: f"{LOGS}/vendor_sample/vendor_sample.log"
    shell: "{AURA} format-sample --configfile {CONFIGFILE} --option size_key=vendor_overlap_sample_size --in dataset={input.dataset} --out sample={output.sample} 2> {log}"


rule judge_replacement:
    input:
        dataset=L["vendor_sample"], rollouts=L["rollouts"],
        prompts=[S.prompt_file(f"judge_{axis}") for axis in ("action_type", "safety")],
    output: judgments=L["replacement_judgments"]
    params: cfg=lambda wc: S.model_hash(config, REPLACEMENT)
    resources: **S.endpoint_resources(config, lambda wc: REPLACEMENT)
    log: main=f"{LOGS}/judge_replacement/{{model}}/shard{{shard}}.log", calls=f"{LOGS}/judge_replacement/{{model}}/shard{{shard}}.calls.jsonl"
    shell: "{AURA} judge --configfile {CONFIGFILE} --model {wildcards.model} --judge {REPLACEMENT} --shard {wildcards.shard}/{N_SHARDS} --option axes=action_type,safety --option only=dataset_items --in dataset={input.dataset} --in rollouts={input.rollouts} --out judgments={output.judgments} --calls-log {log.calls} 2> {log.main}"


rule vendor_overlap_stats:
    localrule: True   # no model call: on a cluster it runs in the main Snakemake process
    input:
        sample=L["vendor_sample"],
        panel=expand(L["panel"], model=list(VENDOR_OVERLAP)),
        judgments=expand(L["replacement_judgments"], model=list(VENDOR_OVERLAP), shard=A.shards(config)),
    output: table24=L["table24_vendor_overlap"]
    params: ins=lambda wc, input: S.in_args(input), cfg=S.section_hash(config["aura"]["stats"], VENDOR_OVERLAP, REPLACEMENT)
    log: f"{LOGS}/vendor_overlap_stats/vendor_overlap_stats.log"
    shell: "{AURA} vendor-overlap --configfile {CONFIGFILE} {params.ins} --out table24={output.table24} 2> {log}"


# Intra-judge consistency (Appendix F.5, Table 25): every panel judge labels the consistency
# models' rollouts `consistency_runs` times; run 0 is the main judging. The sample is the paper's
# calibration subset (the human-labelled items in the dataset) when paths.human_labels is set, else
# a stratified draw; the table counts only the labelled (model, item, axis) units.


rule consistency_sample:
    localrule: True   # no model call: on a cluster it runs in the main Snakemake process
    input: dataset=L["dataset"], human_labels=HUMAN_LABELS or []
    output: sample=L["consistency_sample"]
    params: ins=lambda wc, input: S.in_args(input), size=config["aura"]["evaluate"]["consistency_sample_size"], seed=config["seed"], models=S.section_hash(config["aura"]["evaluate"]["consistency_models"])
    log: f"{LOGS}/consistency_sample/consistency_sample.log"
    shell: "{AURA} consistency --configfile {CONFIGFILE} {params.ins} --out sample={output.sample} 2> {log}"


rule judge_repeat:
    input:
        dataset=L["consistency_sample"], rollouts=L["rollouts"],
        prompts=[S.prompt_file(f"judge_{axis}") for axis in ("detection", "action_type", "safety")],
    output: judgments=L["repeat_judgments"]
    params: cfg=lambda wc: S.model_hash(config, wc.judge)
    resources: **S.endpoint_resources(config, lambda wc: wc.judge)
    log: main=f"{LOGS}/judge_repeat/{{model}}/{{judge}}/run{{run}}/shard{{shard}}.log", calls=f"{LOGS}/judge_repeat/{{model}}/{{judge}}/run{{run}}/shard{{shard}}.calls.jsonl"
    shell: "{AURA} judge --configfile {CONFIGFILE} --model {wildcards.model} --judge {wildcards.judge} --shard {wildcards.shard}/{N_SHARDS} --option run={wildcards.run} --option only=dataset_items --in dataset={input.dataset} --in rollouts={input.rollouts} --out judgments={output.judgments} --calls-log {log.calls} 2> {log.main}"


rule consistency_stats:
    localrule: True   # no model call: on a cluster it runs in the main Snakemake process
    input: sample=L["consistency_sample"], judgments=A.consistency_judgments(config)
    output: table25=L["table25_judge_consistency"]
    params: ins=lambda wc, input: S.in_args(input), runs=config["aura"]["evaluate"]["consistency_runs"]
    log: f"{LOGS}/consistency_stats/consistency_stats.log"
    shell: "{AURA} consistency --configfile {CONFIGFILE} {params.ins} --out table25={output.table25} 2> {log}"
