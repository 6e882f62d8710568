# Dataset construction (paper §4, Appendix C/H): seeds -> prefixes -> variations -> reviews ->
# NSP/SP classification -> pairs -> pair reviews -> released dataset.
GEN = config["roles"]["generator"]
REVIEWERS = config["roles"]["reviewers"]
CLS = config["roles"]["classifier"]


rule select_seeds:
    input: seeds_dir=config["paths"]["seeds"]
    output: seeds=L["seeds"]
    params: cfg=S.section_hash(config["construct"])
    log: f"{LOGS}/select_seeds/select_seeds.log"
    shell: "{AURA} select-seeds --configfile {CONFIGFILE} --in seeds_dir={input.seeds_dir} --out seeds={output.seeds} 2> {log}"


rule tag_truncate:
    input: seeds=L["seeds"]
    output: prefixes=L["prefixes"]
    params: cfg=S.model_hash(config, GEN)
    resources: **S.endpoint_resources(config, lambda wc: GEN)
    log: main=f"{LOGS}/tag_truncate/tag_truncate.log", calls=f"{LOGS}/tag_truncate/tag_truncate.calls.jsonl"
    shell: "{AURA} tag-truncate --configfile {CONFIGFILE} --in seeds={input.seeds} --out prefixes={output.prefixes} --calls-log {log.calls} 2> {log.main}"


rule relevance:
    input: prefixes=L["prefixes"]
    output: relevance=L["relevance"]
    params: cfg=S.model_hash(config, GEN), caps=S.section_hash(config["construct"])
    resources: **S.endpoint_resources(config, lambda wc: GEN)
    log: main=f"{LOGS}/relevance/relevance.log", calls=f"{LOGS}/relevance/relevance.calls.jsonl"
    shell: "{AURA} relevance --configfile {CONFIGFILE} --in prefixes={input.prefixes} --out relevance={output.relevance} --calls-log {log.calls} 2> {log.main}"


rule generate_variations:
    input: relevance=L["relevance"], prefixes=L["prefixes"]
    output: variations=L["variations"]
    params: cfg=S.model_hash(config, GEN)
    resources: **S.endpoint_resources(config, lambda wc: GEN)
    log: main=f"{LOGS}/generate_variations/generate_variations.log", calls=f"{LOGS}/generate_variations/generate_variations.calls.jsonl"
    shell: "{AURA} generate-variations --configfile {CONFIGFILE} --in relevance={input.relevance} --in prefixes={input.prefixes} --out variations={output.variations} --calls-log {log.calls} 2> {log.main}"


rule review_variations:
    input: variations=L["variations"]
    output: review=L["variation_review"]
    params: cfg=lambda wc: S.model_hash(config, wc.reviewer)
    resources: **S.endpoint_resources(config, lambda wc: wc.reviewer)
    log: main=f"{LOGS}/review_variations/{{reviewer}}.log", calls=f"{LOGS}/review_variations/{{reviewer}}.calls.jsonl"
    shell: "{AURA} review-variations --configfile {CONFIGFILE} --model {wildcards.reviewer} --in variations={input.variations} --out review={output.review} --calls-log {log.calls} 2> {log.main}"


rule classify:
    input:
        seeds=L["seeds"],
        prefixes=L["prefixes"],
        variations=L["variations"],
        reviews=expand(L["variation_review"], reviewer=REVIEWERS),
    output: classified=L["classified"]
    params: cfg=S.model_hash(config, CLS), ins=lambda wc, input: S.in_args(input)
    resources: **S.endpoint_resources(config, lambda wc: CLS)
    log: main=f"{LOGS}/classify/classify.log", calls=f"{LOGS}/classify/classify.calls.jsonl"
    shell: "{AURA} classify --configfile {CONFIGFILE} {params.ins} --out classified={output.classified} --calls-log {log.calls} 2> {log.main}"


rule generate_pairs:
    input: classified=L["classified"]
    output: pairs=L["pairs"]
    params: cfg=S.model_hash(config, GEN)
    resources: **S.endpoint_resources(config, lambda wc: GEN)
    log: main=f"{LOGS}/generate_pairs/generate_pairs.log", calls=f"{LOGS}/generate_pairs/generate_pairs.calls.jsonl"
    shell: "{AURA} generate-pairs --configfile {CONFIGFILE} --in classified={input.classified} --out pairs={output.pairs} --calls-log {log.calls} 2> {log.main}"


rule review_pairs:
    input: pairs=L["pairs"]
    output: review=L["pair_review"]
    params: cfg=lambda wc: S.model_hash(config, wc.reviewer)
    resources: **S.endpoint_resources(config, lambda wc: wc.reviewer)
    log: main=f"{LOGS}/review_pairs/{{reviewer}}.log", calls=f"{LOGS}/review_pairs/{{reviewer}}.calls.jsonl"
    shell: "{AURA} review-pairs --configfile {CONFIGFILE} --model {wildcards.reviewer} --in pairs={input.pairs} --out review={output.review} --calls-log {log.calls} 2> {log.main}"


rule finalize:
    input:
        seeds=L["seeds"],
        classified=L["classified"],
        pairs=L["pairs"],
        pair_reviews=expand(L["pair_review"], reviewer=REVIEWERS),
    output: dataset=L["dataset"]
    params: ins=lambda wc, input: S.in_args(input)
    log: f"{LOGS}/finalize/finalize.log"
    shell: "{AURA} finalize --configfile {CONFIGFILE} {params.ins} --out dataset={output.dataset} 2> {log}"
