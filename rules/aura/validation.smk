# Human validation sample (§6, Appendix F.1): drawn from the panels of `aura.evaluate.validation_models`
# (no model call), labelled by people with `python -m aura annotate` into `paths.human_labels`; Tables
# 18 (sampled / kept per axis) and 19 (per panel agreement stratum) count it, re-made when labels change.
import aura.families.aura.dag as A  # the AURA family's DAG helpers
VALIDATION_MODELS = config["aura"]["evaluate"]["validation_models"]
_VALIDATION_HUMAN = config["paths"].get("human_labels")


rule validation_sample:
    input:
        dataset=L["dataset"],
        panel=expand(L["panel"], model=VALIDATION_MODELS),
        rollouts=expand(L["rollouts"], model=VALIDATION_MODELS, shard=A.shards(config)),
    output: sample=L["validation_sample"]
    params: ins=lambda wc, input: S.in_args(input), cfg=S.section_hash(VALIDATION_MODELS, config["aura"]["evaluate"]["validation_sample_sizes"], config["seed"])
    log: f"{LOGS}/validation_sample/validation_sample.log"
    shell: "{AURA} validation-sample --configfile {CONFIGFILE} {params.ins} --out sample={output.sample} 2> {log}"


rule validation_tables:
    input:
        sample=L["validation_sample"],
        **({"human_labels": _VALIDATION_HUMAN} if _VALIDATION_HUMAN else {}),
        panel=expand(L["panel"], model=VALIDATION_MODELS),
        validation=A.validation_judgments(config),
    output: table18=L["table18_validation_retention"], table19=L["table19_validation_strata"]
    params: ins=lambda wc, input: S.in_args(input)
    log: f"{LOGS}/validation_tables/validation_tables.log"
    shell: "{AURA} validation-tables --configfile {CONFIGFILE} {params.ins} --out table18={output.table18} --out table19={output.table19} 2> {log}"
