# Dataset construction (paper §4, Appendix C/H; prompts P1-P9): seeds -> tags and prefixes ->
# dimension relevance -> variations -> reviews (x3) -> NSP/SP classification -> pairs ->
# pair reviews (x3) -> released dataset -> composition table and funnel.
GEN = config["aura"]["roles"]["generator"]
REVIEWERS = config["aura"]["roles"]["reviewers"]
CLS = config["aura"]["roles"]["classifier"]
DIMS = S.prompt_file("dimensions")


DOWNLOAD = config["aura"]["seed_download"] if config["aura"].get("seed_download", {}).get("enabled") else None
SEEDS_DIR = DOWNLOAD["dest"] if DOWNLOAD else config["paths"]["seeds"]


if DOWNLOAD:
    rule fetch_seeds:
        localrule: True   # no model call: on a cluster it runs in the main Snakemake process
        output: marker=f"{DOWNLOAD['dest']}/.fetched.json"
        params: url=DOWNLOAD["url"]
        log: f"{LOGS}/fetch_seeds/fetch_seeds.log"
        shell: "{AURA} fetch-seeds --configfile {CONFIGFILE} 2> {log}"


rule select_seeds:
    localrule: True   # no model call: on a cluster it runs in the main Snakemake process
    # A downloaded seed folder is tracked through its marker file (the folder holds the marker).
    input: [f"{DOWNLOAD['dest']}/.fetched.json"] if DOWNLOAD else [SEEDS_DIR]
    output: seeds=L["seeds"]
    params: seeds_dir=SEEDS_DIR, cfg=S.section_hash(config["aura"]["construct"].get("max_seeds"))
    log: f"{LOGS}/select_seeds/select_seeds.log"
    shell: "{AURA} select-seeds --configfile {CONFIGFILE} --in seeds_dir={params.seeds_dir} --out seeds={output.seeds} 2> {log}"


rule tag_truncate:
    input: seeds=L["seeds"], prompt=S.prompt_file("p1_step_tagging")
    output: tags=L["tags"], prefixes=L["prefixes"]
    params: cfg=S.model_hash(config, GEN), tries=config["aura"]["construct"]["rule_tries"]
    resources: **S.endpoint_resources(config, lambda wc: GEN)
    log: main=f"{LOGS}/tag_truncate/tag_truncate.log", calls=f"{LOGS}/tag_truncate/tag_truncate.calls.jsonl"
    shell: "{AURA} tag-truncate --configfile {CONFIGFILE} --in seeds={input.seeds} --out tags={output.tags} --out prefixes={output.prefixes} --calls-log {log.calls} 2> {log.main}"


rule relevance:
    input: seeds=L["seeds"], prefixes=L["prefixes"], prompt=S.prompt_file("p2_dimension_relevance"), dims=DIMS
    output: relevance=L["relevance"]
    params: cfg=S.model_hash(config, GEN), cap=config["aura"]["construct"]["max_dimensions_per_prefix"]
    resources: **S.endpoint_resources(config, lambda wc: GEN)
    log: main=f"{LOGS}/relevance/relevance.log", calls=f"{LOGS}/relevance/relevance.calls.jsonl"
    shell: "{AURA} relevance --configfile {CONFIGFILE} --in seeds={input.seeds} --in prefixes={input.prefixes} --out relevance={output.relevance} --calls-log {log.calls} 2> {log.main}"


rule generate_variations:
    input:
        seeds=L["seeds"], prefixes=L["prefixes"], relevance=L["relevance"], dims=DIMS,
        prompts=[S.prompt_file("p3_harm_intensity_variation"), S.prompt_file("p4_contextual_variation")],
    output: variations=L["variations"]
    params: cfg=S.model_hash(config, GEN)
    resources: **S.endpoint_resources(config, lambda wc: GEN)
    log: main=f"{LOGS}/generate_variations/generate_variations.log", calls=f"{LOGS}/generate_variations/generate_variations.calls.jsonl"
    shell: "{AURA} generate-variations --configfile {CONFIGFILE} --in seeds={input.seeds} --in prefixes={input.prefixes} --in relevance={input.relevance} --out variations={output.variations} --calls-log {log.calls} 2> {log.main}"


rule review_variations:
    input:
        seeds=L["seeds"], prefixes=L["prefixes"], variations=L["variations"], dims=DIMS,
        prompts=[S.prompt_file("p5_harm_intensity_review"), S.prompt_file("p6_contextual_review")],
    output: review=L["variation_review"]
    params: cfg=lambda wc: S.model_hash(config, wc.reviewer)
    resources: **S.endpoint_resources(config, lambda wc: wc.reviewer)
    log: main=f"{LOGS}/review_variations/{{reviewer}}.log", calls=f"{LOGS}/review_variations/{{reviewer}}.calls.jsonl"
    shell: "{AURA} review-variations --configfile {CONFIGFILE} --model {wildcards.reviewer} --in seeds={input.seeds} --in prefixes={input.prefixes} --in variations={input.variations} --out review={output.review} --calls-log {log.calls} 2> {log.main}"


rule classify:
    input:
        seeds=L["seeds"], prefixes=L["prefixes"], variations=L["variations"],
        reviews=expand(L["variation_review"], reviewer=REVIEWERS), prompt=S.prompt_file("p7_pair_classification"),
    output: classified=L["classified"]
    params:
        ins=lambda wc, input: S.in_args(input),
        cfg=S.model_hash(config, CLS), reviewers=S.section_hash(REVIEWERS), tries=config["aura"]["construct"]["rule_tries"],
    resources: **S.endpoint_resources(config, lambda wc: CLS)
    log: main=f"{LOGS}/classify/classify.log", calls=f"{LOGS}/classify/classify.calls.jsonl"
    shell: "{AURA} classify --configfile {CONFIGFILE} {params.ins} --out classified={output.classified} --calls-log {log.calls} 2> {log.main}"


rule generate_pairs:
    input: seeds=L["seeds"], classified=L["classified"], prompt=S.prompt_file("p8_pair_generation")
    output: pairs=L["pairs"]
    params: cfg=S.model_hash(config, GEN)
    resources: **S.endpoint_resources(config, lambda wc: GEN)
    log: main=f"{LOGS}/generate_pairs/generate_pairs.log", calls=f"{LOGS}/generate_pairs/generate_pairs.calls.jsonl"
    shell: "{AURA} generate-pairs --configfile {CONFIGFILE} --in seeds={input.seeds} --in classified={input.classified} --out pairs={output.pairs} --calls-log {log.calls} 2> {log.main}"


rule review_pairs:
    input: pairs=L["pairs"], prompt=S.prompt_file("p9_pair_review")
    output: review=L["pair_review"]
    params: cfg=lambda wc: S.model_hash(config, wc.reviewer)
    resources: **S.endpoint_resources(config, lambda wc: wc.reviewer)
    log: main=f"{LOGS}/review_pairs/{{reviewer}}.log", calls=f"{LOGS}/review_pairs/{{reviewer}}.calls.jsonl"
    shell: "{AURA} review-pairs --configfile {CONFIGFILE} --model {wildcards.reviewer} --in pairs={input.pairs} --out review={output.review} --calls-log {log.calls} 2> {log.main}"


EXCLUSIONS_FILE = config["aura"]["construct"].get("exclusions_file")


rule finalize:
    localrule: True   # no model call: on a cluster it runs in the main Snakemake process
    # Rejections of every stage go to exclusions.jsonl, so finalize reads every stage's output; the
    # manual release exclusion file (aura.construct.exclusions_file) is an input when configured.
    input:
        seeds=L["seeds"], tags=L["tags"], prefixes=L["prefixes"], relevance=L["relevance"],
        variations=L["variations"], reviews=expand(L["variation_review"], reviewer=REVIEWERS),
        classified=L["classified"], pairs=L["pairs"], pair_reviews=expand(L["pair_review"], reviewer=REVIEWERS),
        exclusions_file=EXCLUSIONS_FILE or [],
    output: dataset=L["dataset"], exclusions=L["exclusions"], card=L["datacard"]
    params: ins=lambda wc, input: S.in_args(input), reviewers=S.section_hash(REVIEWERS)
    log: f"{LOGS}/finalize/finalize.log"
    shell: "{AURA} finalize --configfile {CONFIGFILE} {params.ins} --out dataset={output.dataset} --out exclusions={output.exclusions} --out card={output.card} 2> {log}"


rule construction_counts:
    localrule: True   # no model call: on a cluster it runs in the main Snakemake process
    input:
        seeds=L["seeds"], tags=L["tags"], prefixes=L["prefixes"], relevance=L["relevance"],
        variations=L["variations"], classified=L["classified"], pairs=L["pairs"], dataset=L["dataset"],
        pair_reviews=expand(L["pair_review"], reviewer=REVIEWERS), exclusions=L["exclusions"],
    output: composition=L["construction_composition"], funnel=L["construction_funnel"]
    params: ins=lambda wc, input: S.in_args(input), reviewers=S.section_hash(REVIEWERS)
    log: f"{LOGS}/construction_counts/construction_counts.log"
    shell: "{AURA} construction-counts --configfile {CONFIGFILE} {params.ins} --out composition={output.composition} --out funnel={output.funnel} 2> {log}"
