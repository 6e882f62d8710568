# Dataset construction (paper §4, Appendix C/H; prompts P1-P9): seeds -> tags and prefixes ->
# dimension relevance -> variations -> reviews (x3) -> NSP/SP classification -> pairs ->
# pair reviews (x3) -> released dataset -> composition table and funnel.
GEN = config["aura"]["roles"]["generator"]
REVIEWERS = config["aura"]["roles"]["reviewers"]
CLS = config["aura"]["roles"]["classifier"]


DOWNLOAD = config["aura"]["seed_download"] if config["aura"].get("seed_download", {}).get("enabled") else None
SEEDS_DIR = DOWNLOAD["dest"] if DOWNLOAD else config["paths"]["seeds"]


if DOWNLOAD:
    rule fetch_seeds:
        localrule: True   # no model call: on a cluster it runs in the main Snakemake process
        output: marker=f"{DOWNLOAD['dest']}/.fetched.json"
        params: url=DOWNLOAD["url"]
        log: f"{LOGS}/fetch_seeds/fetch_seeds.log"
        shell: S.command("fetch-seeds")


rule select_seeds:
    localrule: True   # no model call: on a cluster it runs in the main Snakemake process
    # A downloaded seed folder is tracked through its marker file (the folder holds the marker).
    input: [f"{DOWNLOAD['dest']}/.fetched.json"] if DOWNLOAD else [SEEDS_DIR]
    output: **S.outputs(config, "select-seeds")
    params: io=S.io, seeds_dir=SEEDS_DIR, cfg=S.section_hash(config["aura"]["construct"].get("max_seeds"))
    log: f"{LOGS}/select_seeds/select_seeds.log"
    shell: S.command("select-seeds", folders={"seeds_dir": "{params.seeds_dir}"})


rule tag_truncate:
    input: **S.inputs(config, "tag-truncate")
    output: **S.outputs(config, "tag-truncate")
    params: io=S.io, cfg=S.model_hash(config, GEN), tries=config["aura"]["construct"]["rule_tries"]
    resources: **S.endpoint_resources(config, lambda wc: GEN)
    log: main=f"{LOGS}/tag_truncate/tag_truncate.log", calls=f"{LOGS}/tag_truncate/tag_truncate.calls.jsonl"
    shell: S.command("tag-truncate")


rule relevance:
    input: **S.inputs(config, "relevance")
    output: **S.outputs(config, "relevance")
    params: io=S.io, cfg=S.model_hash(config, GEN), cap=config["aura"]["construct"]["max_dimensions_per_prefix"]
    resources: **S.endpoint_resources(config, lambda wc: GEN)
    log: main=f"{LOGS}/relevance/relevance.log", calls=f"{LOGS}/relevance/relevance.calls.jsonl"
    shell: S.command("relevance")


rule generate_variations:
    input: **S.inputs(config, "generate-variations")
    output: **S.outputs(config, "generate-variations")
    params: io=S.io, cfg=S.model_hash(config, GEN)
    resources: **S.endpoint_resources(config, lambda wc: GEN)
    log: main=f"{LOGS}/generate_variations/generate_variations.log", calls=f"{LOGS}/generate_variations/generate_variations.calls.jsonl"
    shell: S.command("generate-variations")


rule review_variations:
    input: **S.inputs(config, "review-variations")
    output: **S.outputs(config, "review-variations")
    params: io=S.io, cfg=lambda wc: S.model_hash(config, wc.reviewer)
    resources: **S.endpoint_resources(config, lambda wc: wc.reviewer)
    log: main=f"{LOGS}/review_variations/{{reviewer}}.log", calls=f"{LOGS}/review_variations/{{reviewer}}.calls.jsonl"
    shell: S.command("review-variations", model="{wildcards.reviewer}")


rule classify:
    input: **S.inputs(config, "classify", reviews=expand(L["variation_review"], reviewer=REVIEWERS))
    output: **S.outputs(config, "classify")
    params:
        io=S.io,
        cfg=S.model_hash(config, CLS), reviewers=S.section_hash(REVIEWERS), tries=config["aura"]["construct"]["rule_tries"],
    resources: **S.endpoint_resources(config, lambda wc: CLS)
    log: main=f"{LOGS}/classify/classify.log", calls=f"{LOGS}/classify/classify.calls.jsonl"
    shell: S.command("classify")


rule generate_pairs:
    input: **S.inputs(config, "generate-pairs")
    output: **S.outputs(config, "generate-pairs")
    params: io=S.io, cfg=S.model_hash(config, GEN)
    resources: **S.endpoint_resources(config, lambda wc: GEN)
    log: main=f"{LOGS}/generate_pairs/generate_pairs.log", calls=f"{LOGS}/generate_pairs/generate_pairs.calls.jsonl"
    shell: S.command("generate-pairs")


rule review_pairs:
    input: **S.inputs(config, "review-pairs")
    output: **S.outputs(config, "review-pairs")
    params: io=S.io, cfg=lambda wc: S.model_hash(config, wc.reviewer)
    resources: **S.endpoint_resources(config, lambda wc: wc.reviewer)
    log: main=f"{LOGS}/review_pairs/{{reviewer}}.log", calls=f"{LOGS}/review_pairs/{{reviewer}}.calls.jsonl"
    shell: S.command("review-pairs", model="{wildcards.reviewer}")


EXCLUSIONS_FILE = config["aura"]["construct"].get("exclusions_file")


rule finalize:
    localrule: True   # no model call: on a cluster it runs in the main Snakemake process
    # Rejections of every stage go to exclusions.jsonl, so finalize reads every stage's output; the
    # manual release exclusion file (aura.construct.exclusions_file) is an input when configured.
    input:
        **S.inputs(config, "finalize", reviews=expand(L["variation_review"], reviewer=REVIEWERS),
                   pair_reviews=expand(L["pair_review"], reviewer=REVIEWERS), exclusions_file=EXCLUSIONS_FILE or []),
    output: **S.outputs(config, "finalize")
    params: io=S.io, reviewers=S.section_hash(REVIEWERS)
    log: f"{LOGS}/finalize/finalize.log"
    shell: S.command("finalize")


rule construction_counts:
    localrule: True   # no model call: on a cluster it runs in the main Snakemake process
    input: **S.inputs(config, "construction-counts", pair_reviews=expand(L["pair_review"], reviewer=REVIEWERS))
    output: **S.outputs(config, "construction-counts")
    params: io=S.io, reviewers=S.section_hash(REVIEWERS)
    log: f"{LOGS}/construction_counts/construction_counts.log"
    shell: S.command("construction-counts")


rule leak_probe:
    input: **S.inputs(config, "leak-probe")
    output: **S.outputs(config, "leak-probe")
    params: io=S.io, cfg=S.model_hash(config, CLS)
    resources: **S.endpoint_resources(config, lambda wc: CLS)
    log: main=f"{LOGS}/leak_probe/leak_probe.log", calls=f"{LOGS}/leak_probe/leak_probe.calls.jsonl"
    shell: S.command("leak-probe")
