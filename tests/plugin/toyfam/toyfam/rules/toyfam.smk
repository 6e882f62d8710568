# toyfam: one job, the configured model answers every item (python -m aura toyfam-answer); the report
# notebook is rendered by the core's render rules from the manifest.
TOY = config["toyfam"]

rule toyfam_answer:
    input: questions=TOY["items"], prompt=S.prompt_file("toyfam_answer")
    output: answers=L["toyfam_answers"]
    params: cfg=S.model_hash(config, TOY["model"])
    resources: **S.endpoint_resource(config, TOY["model"])
    log: main=f"{LOGS}/toyfam_answer/toyfam_answer.log", calls=f"{LOGS}/toyfam_answer/toyfam_answer.calls.jsonl"
    shell: "{AURA} toyfam-answer --configfile {CONFIGFILE} --in questions={input.questions} --out answers={output.answers} --calls-log {log.calls} 2> {log.main}"
