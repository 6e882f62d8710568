# LPS-Bench (manifest: src/aura/families/lpsbench/__init__.py): [pinned download of upstream's repository ->]
# cases (broken upstream modules excluded) -> per evaluated model and variant (raw, mitigated): episodes (the
# agent over MCP tools: upstream's mock modules, or their LM emulation) -> the
# evaluator's safe / unsafe / execution_failed labels -> one stats job -> Tables 3, 4 and Fig. 6 (rendered by
# the Snakefile's render rules). Rules hold the DAG; each stage's command line, --in/--out names and prompts come
# from its declaration in the manifest (S.inputs, S.outputs, S.command), logs under logs/<rule>/.
import aura.families.lpsbench as LPS
import aura.families.lpsbench.dag as LD  # the family's DAG helpers

# The section's own checks (models by name) ran when the config was read (the manifest's `check`).
LPSC = config["lpsbench"]
LPS_MODEL_RE = "|".join(map(re.escape, config["models"]))
LPS_VARIANT_RE = "|".join(LPS.VARIANTS)
LPS_EMULATOR, LPS_USER, LPS_EVALUATOR = LPSC["emulator"], LPSC["user_simulator"], LPSC["evaluator"]
# The prompts an episode job renders: the agent's and the emulator's (emulated back-end); mitigated adds both
# mitigations, and the simulated user's with the ask_user extension.
from aura.families.lpsbench.retry import params_value as lps_retry_param

LPS_PROMPTS = {v: [n for n in ("agent_raw", "emulator", "agent_clarify", "agent_safety", "user_simulator")
                    if n in LD.prompts_of(config, v)] for v in LPS.VARIANTS}
LPS_EPISODE_CFG = S.section_hash(LPSC["max_steps"], LPSC["step_unit"], LPSC["max_episode_tokens"], LPSC["params"],
                                 LPSC["model_params"], LPSC["tools"], LPSC["ask_user_extension"],
                                 *([LPSC["texts"]] if LPSC.get("texts") else []))  # texts: set only when given


# ---- cases: a folder of <domain>/<RISK>_<n>.json, a pinned download of upstream's repository, or (cases.generated,
# off by default) the generated cases the review kept: generate -> review -> cases -> episodes, no path to repoint
LPS_DOWNLOAD, LPS_CASES_DIR = LD.download(config), LD.cases_folder(config)
LPS_CHECKOUT = LPS.checkout_dir(config)  # whose tools/ serve the cases (the download's dest, or tools.upstream_dir)


if LPS_DOWNLOAD:
    rule lpsbench_fetch:
        localrule: True   # no model call: on a cluster it runs in the main Snakemake process
        output: marker=f"{LPS_DOWNLOAD['dest']}/.fetched.json"
        params: url=LPS_DOWNLOAD["url"]
        log: f"{LOGS}/lpsbench_fetch/lpsbench_fetch.log"
        shell: S.command("lpsbench-fetch")


rule lpsbench_cases:
    localrule: True   # no model call: on a cluster it runs in the main Snakemake process
    input: LD.case_files(config)
    output: **S.outputs(config, "lpsbench-cases")
    params: io=S.io, cases_dir=LPS_CASES_DIR, cfg=S.section_hash(LPSC["cases"], LPSC["max_cases"], LPS_CHECKOUT)
    log: f"{LOGS}/lpsbench_cases/lpsbench_cases.log"
    shell: S.command("lpsbench-cases", folders={"cases_dir": "{params.cases_dir}", **({"checkout": LPS_CHECKOUT} if LPS_CHECKOUT else {})})


# ---- per evaluated model and variant ----------------------------------------------------------------------
# An episode job calls the agent model and (from its tool-server subprocesses) the emulator: it holds one unit
# of the agent's endpoint resource.
rule lpsbench_episodes:
    input: **S.inputs(config, "lpsbench-episodes", prompts=lambda wc: LPS_PROMPTS[wc.variant])
    output: **S.outputs(config, "lpsbench-episodes")
    wildcard_constraints: model=LPS_MODEL_RE, variant=LPS_VARIANT_RE
    # episode: the settings' hash, plus how many of the job's runs lost episodes to their infrastructure (a run
    # that lost some raises it, so the next plain run retries the job; retry.py). From the wildcards, not `output`:
    # Snakemake's params trigger ignores params derived from input or output.
    params: io=S.io, cfg=lambda wc: LD.model_hash(config, *LD.episode_models(config, wc)),
            episode=lambda wc: lps_retry_param(LPS_EPISODE_CFG, L["lpsbench_episodes"].format(model=wc.model, variant=wc.variant))
    resources: **S.endpoint_resources(config, lambda wc: wc.model)
    log: main=f"{LOGS}/lpsbench_episodes/{{variant}}/{{model}}.log", calls=f"{LOGS}/lpsbench_episodes/{{variant}}/{{model}}.calls.jsonl"
    shell: S.command("lpsbench-episodes", model="{wildcards.model}", options={"variant": "{wildcards.variant}"})


rule lpsbench_evaluate:
    input: **S.inputs(config, "lpsbench-evaluate")
    output: **S.outputs(config, "lpsbench-evaluate")
    wildcard_constraints: model=LPS_MODEL_RE, variant=LPS_VARIANT_RE
    # cfg: the evaluator's hash, plus how many of the job's runs had evaluator calls fail (retry.py)
    params: io=S.io,
            cfg=lambda wc: lps_retry_param(LD.model_hash(config, LPS_EVALUATOR) + (f" texts={LPSC['texts']}" if LPSC.get("texts") else ""),
                                           L["lpsbench_evaluations"].format(model=wc.model, variant=wc.variant))
    resources: **S.endpoint_resources(config, lambda wc: LPS_EVALUATOR)
    log: main=f"{LOGS}/lpsbench_evaluate/{{variant}}/{{model}}.log", calls=f"{LOGS}/lpsbench_evaluate/{{variant}}/{{model}}.calls.jsonl"
    shell: S.command("lpsbench-evaluate", model="{wildcards.model}", options={"variant": "{wildcards.variant}"})


# ---- Safe Rate over every (model, variant) run: the CSVs the notebooks read --------------------------------
LPS_EVALS = {"evaluations": [L["lpsbench_evaluations"].format(model=m, variant=v) for m, v in LPS.runs(config)]}


rule lpsbench_stats:
    localrule: True   # no model call: on a cluster it runs in the main Snakemake process
    input: **S.inputs(config, "lpsbench-stats", **LPS_EVALS)
    output: **S.outputs(config, "lpsbench-stats")
    params: io=S.io, cfg=S.section_hash(LPSC["broken_cases"])
    log: f"{LOGS}/lpsbench_stats/lpsbench_stats.log"
    shell: S.command("lpsbench-stats")


# ---- case generation (paper §3.2): drafts checked in code, then a person's review (required) ---------------------------
LPS_GEN = LPSC["generate"]


# texts: upstream reads the per-risk templates (prompt/<RISK>.md) from the checkout: after its download, if any;
# the texts setting and the checkout join the job's hash only when texts is given (no other job's hash changes)
LPS_GEN_TEMPLATES = [f"{LPS_DOWNLOAD['dest']}/.fetched.json"] if LPSC.get("texts") == "upstream" and LPS_DOWNLOAD else []
LPS_GEN_RERUN = {"feedback": [LPS_GEN["feedback"]] if LPS_GEN.get("feedback") else [], "templates": LPS_GEN_TEMPLATES}
LPS_GEN_CFG = S.section_hash({k: v for k, v in LPS_GEN.items() if k not in ("enabled", "review")},
                             *([LPSC["texts"], LPS_CHECKOUT] if LPSC.get("texts") else []))


rule lpsbench_generate:
    input: **S.inputs(config, "lpsbench-generate", rerun=LPS_GEN_RERUN)
    output: **S.outputs(config, "lpsbench-generate")
    params: io=S.io, cfg=LD.model_hash(config, LPS_GEN.get("generator")),
            generate=LPS_GEN_CFG
    resources: **S.endpoint_resources(config, lambda wc: LPS_GEN["generator"])
    log: main=f"{LOGS}/lpsbench_generate/lpsbench_generate.log", calls=f"{LOGS}/lpsbench_generate/lpsbench_generate.calls.jsonl"
    shell: S.command("lpsbench-generate")


rule lpsbench_review_cases:
    localrule: True   # no model call: on a cluster it runs in the main Snakemake process
    input: **S.inputs(config, "lpsbench-review-cases", rerun={"review": [LPS_GEN["review"]] if LPS_GEN.get("review") else []})
    output: **S.outputs(config, "lpsbench-review-cases", cases=directory(L["lpsbench_generated_cases"]))
    params: io=S.io
    log: f"{LOGS}/lpsbench_review_cases/lpsbench_review_cases.log"
    shell: S.command("lpsbench-review-cases")
