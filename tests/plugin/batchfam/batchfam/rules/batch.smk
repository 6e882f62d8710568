# batch: one job, the judge model says which requests should be refused (python -m aura batch-refusal); the
# report notebook is rendered by the core's render rules from the manifest. Without `batch.judge` the family is
# on (as every installed family is by default) and runs nothing: no rule.
BATCH = config["batch"]

if BATCH.get("judge"):
    rule batch_refusal:
        input: **S.inputs(config, "batch-refusal", requests=BATCH["requests"])
        output: **S.outputs(config, "batch-refusal")
        params: io=S.io, cfg=S.model_hash(config, BATCH["judge"])
        resources: **S.endpoint_resource(config, BATCH["judge"])
        log: main=f"{LOGS}/batch_refusal/batch_refusal.log", calls=f"{LOGS}/batch_refusal/batch_refusal.calls.jsonl"
        shell: S.command("batch-refusal")
