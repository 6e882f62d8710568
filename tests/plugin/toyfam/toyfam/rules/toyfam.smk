# toyfam: one job, the configured model answers every item (python -m aura toyfam-answer); the report
# notebook is rendered by the core's render rules from the manifest.
TOY = config["toyfam"]

rule toyfam_answer:
    input: **S.inputs(config, "toyfam-answer", questions=TOY["items"])
    output: **S.outputs(config, "toyfam-answer")
    params: io=S.io, cfg=S.model_hash(config, TOY["model"])
    resources: **S.endpoint_resource(config, TOY["model"])
    log: main=f"{LOGS}/toyfam_answer/toyfam_answer.log", calls=f"{LOGS}/toyfam_answer/toyfam_answer.calls.jsonl"
    shell: S.command("toyfam-answer")
