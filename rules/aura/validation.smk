# Human validation sample (§6, Appendix F.1): drawn from the panels of `aura.evaluate.validation_models`
# (no model call), labelled by people with `python -m aura annotate` into `paths.human_labels`; Tables
# 18 (sampled / kept per axis) and 19 (per panel agreement stratum) count it, re-made when labels change.
import aura.families.aura.dag as A  # the AURA family's DAG helpers
VALIDATION_MODELS = config["aura"]["evaluate"]["validation_models"]
_VALIDATION_HUMAN = config["paths"].get("human_labels")


rule validation_sample:
    input:
        **S.inputs(config, "validation-sample", panel=expand(L["panel"], model=VALIDATION_MODELS),
                   rollouts=expand(L["rollouts"], model=VALIDATION_MODELS, shard=A.shards(config))),
    output: **S.outputs(config, "validation-sample")
    params: io=S.io, cfg=S.section_hash(VALIDATION_MODELS, config["aura"]["evaluate"]["validation_sample_sizes"], config["seed"])
    log: f"{LOGS}/validation_sample/validation_sample.log"
    shell: S.command("validation-sample")


rule validation_tables:
    input:
        **S.inputs(config, "validation-tables", **({"human_labels": _VALIDATION_HUMAN} if _VALIDATION_HUMAN else {}),
                   panel=expand(L["panel"], model=VALIDATION_MODELS), validation=A.validation_judgments(config)),
    output: **S.outputs(config, "validation-tables")
    params: io=S.io
    log: f"{LOGS}/validation_tables/validation_tables.log"
    shell: S.command("validation-tables")
