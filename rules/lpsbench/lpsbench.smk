# LPS-Bench (manifest: src/aura/families/lpsbench/__init__.py): [pinned download of upstream's repository ->]
# cases (broken upstream modules excluded) -> per evaluated model and variant (raw, mitigated): episodes (the
# agent over MCP tools: upstream's mock modules, or their LM emulation) -> the
# evaluator's safe / unsafe / execution_failed labels -> one stats job -> Tables 3, 4 and Fig. 6 (rendered by
# the Snakefile's render rules). Rules hold no logic: each calls `python -m aura lpsbench-<stage>` with its
# inputs and outputs, logs under logs/<rule>/.
import aura.families.lpsbench as LPS

# The section's own checks (models by name) ran when the config was read (the manifest's `check`).
LPSC = config["lpsbench"]
LPS_MODEL_RE = "|".join(map(re.escape, config["models"]))
LPS_VARIANT_RE = "|".join(LPS.VARIANTS)
LPS_EMULATOR, LPS_USER, LPS_EVALUATOR = LPSC["emulator"], LPSC["user_simulator"], LPSC["evaluator"]
# The prompts an episode job renders: the agent's and the emulator's (emulated back-end); mitigated adds both
# mitigations, and the simulated user's with the ask_user extension.
from aura.families.lpsbench.episodes import prompts_of as lps_prompts_of
from aura.families.lpsbench.retry import params_value as lps_retry_param

LPS_PROMPTS = {v: [S.prompt_file(n) for n in ("agent_raw", "emulator", "agent_clarify", "agent_safety", "user_simulator")
                    if n in lps_prompts_of(config, v)] for v in LPS.VARIANTS}
LPS_EPISODE_CFG = S.section_hash(LPSC["max_steps"], LPSC["step_unit"], LPSC["max_episode_tokens"], LPSC["params"],
                                 LPSC["model_params"], LPSC["tools"], LPSC["ask_user_extension"],
                                 *([LPSC["texts"]] if LPSC.get("texts") else []))  # texts: set only when given


def lps_model_hash(*models):
    return S.model_hash(config, *[m for m in models if m])


def lps_episode_models(wc):
    """The models an episode job calls: the agent, the emulator, the simulated user when mitigated."""
    emulated = LPSC["tools"].get("backend", "emulated") == "emulated"
    return [wc.model, LPS_EMULATOR if emulated else None,
            LPS_USER if wc.variant == "mitigated" and LPSC["ask_user_extension"] else None]


# ---- cases: a folder of <domain>/<RISK>_<n>.json, a pinned download of upstream's repository, or (cases.generated,
# off by default) the generated cases the review kept: generate -> review -> cases -> episodes, no path to repoint
LPS_FROM_GENERATED = bool(LPSC["cases"].get("generated"))
LPS_DOWNLOAD = LPSC["cases"].get("download") if (LPSC["cases"].get("download") or {}).get("enabled", True) else None
LPS_DOWNLOAD = None if LPS_FROM_GENERATED else LPS_DOWNLOAD
LPS_CASES_DIR = L["lpsbench_generated_cases"] if LPS_FROM_GENERATED else LPS.cases_dir(config)
LPS_CHECKOUT = LPS.checkout_dir(config)  # whose tools/ serve the cases (the download's dest, or tools.upstream_dir)


def lps_case_files():
    """The case files, so an edited case reruns the cases job; the folder itself when it does not exist yet
    (Snakemake then names it as missing); the review job's output folder for generated cases."""
    if LPS_FROM_GENERATED:
        return [L["lpsbench_generated_cases"]]
    if LPS_DOWNLOAD:
        return [f"{LPS_DOWNLOAD['dest']}/.fetched.json"]
    folder = Path(LPS_CASES_DIR)
    return sorted(str(p) for p in folder.glob("*/*.json")) if folder.is_dir() else [LPS_CASES_DIR]


if LPS_DOWNLOAD:
    rule lpsbench_fetch:
        localrule: True   # no model call: on a cluster it runs in the main Snakemake process
        output: marker=f"{LPS_DOWNLOAD['dest']}/.fetched.json"
        params: url=LPS_DOWNLOAD["url"]
        log: f"{LOGS}/lpsbench_fetch/lpsbench_fetch.log"
        shell: "{AURA} lpsbench-fetch --configfile {CONFIGFILE} 2> {log}"


rule lpsbench_cases:
    localrule: True   # no model call: on a cluster it runs in the main Snakemake process
    input: lps_case_files()
    output: lps_cases=L["lpsbench_cases"], excluded=L["lpsbench_excluded"]
    params: cases_dir=LPS_CASES_DIR, cfg=S.section_hash(LPSC["cases"], LPSC["max_cases"], LPS_CHECKOUT),
            checkout=f"--in checkout={LPS_CHECKOUT}" if LPS_CHECKOUT else ""
    log: f"{LOGS}/lpsbench_cases/lpsbench_cases.log"
    shell: "{AURA} lpsbench-cases --configfile {CONFIGFILE} --in cases_dir={params.cases_dir} {params.checkout} --out cases={output.lps_cases} --out excluded={output.excluded} 2> {log}"


# ---- per evaluated model and variant ----------------------------------------------------------------------
# An episode job calls the agent model and (from its tool-server subprocesses) the emulator: it holds one unit
# of the agent's endpoint resource.
rule lpsbench_episodes:
    input: lps_cases=L["lpsbench_cases"], prompts=lambda wc: LPS_PROMPTS[wc.variant]
    output: episodes=L["lpsbench_episodes"]
    wildcard_constraints: model=LPS_MODEL_RE, variant=LPS_VARIANT_RE
    # episode: the settings' hash, plus how many of the job's runs lost episodes to their infrastructure (a run
    # that lost some raises it, so the next plain run retries the job; retry.py). From the wildcards, not `output`:
    # Snakemake's params trigger ignores params derived from input or output.
    params: cfg=lambda wc: lps_model_hash(*lps_episode_models(wc)),
            episode=lambda wc: lps_retry_param(LPS_EPISODE_CFG, L["lpsbench_episodes"].format(model=wc.model, variant=wc.variant))
    resources: **S.endpoint_resources(config, lambda wc: wc.model)
    log: main=f"{LOGS}/lpsbench_episodes/{{variant}}/{{model}}.log", calls=f"{LOGS}/lpsbench_episodes/{{variant}}/{{model}}.calls.jsonl"
    shell: "{AURA} lpsbench-episodes --configfile {CONFIGFILE} --model {wildcards.model} --option variant={wildcards.variant} --in cases={input.lps_cases} --out episodes={output.episodes} --calls-log {log.calls} 2> {log.main}"


rule lpsbench_evaluate:
    input: lps_cases=L["lpsbench_cases"], episodes=L["lpsbench_episodes"],
           prompts=[S.prompt_file("evaluator"), S.prompt_file("evaluator_risks")]
    output: evaluations=L["lpsbench_evaluations"]
    wildcard_constraints: model=LPS_MODEL_RE, variant=LPS_VARIANT_RE
    # cfg: the evaluator's hash, plus how many of the job's runs had evaluator calls fail (retry.py)
    params: cfg=lambda wc: lps_retry_param(lps_model_hash(LPS_EVALUATOR) + (f" texts={LPSC['texts']}" if LPSC.get("texts") else ""), L["lpsbench_evaluations"].format(model=wc.model, variant=wc.variant))
    resources: **S.endpoint_resources(config, lambda wc: LPS_EVALUATOR)
    log: main=f"{LOGS}/lpsbench_evaluate/{{variant}}/{{model}}.log", calls=f"{LOGS}/lpsbench_evaluate/{{variant}}/{{model}}.calls.jsonl"
    shell: "{AURA} lpsbench-evaluate --configfile {CONFIGFILE} --model {wildcards.model} --option variant={wildcards.variant} --in cases={input.lps_cases} --in episodes={input.episodes} --out evaluations={output.evaluations} --calls-log {log.calls} 2> {log.main}"


# ---- Safe Rate over every (model, variant) run: the CSVs the notebooks read --------------------------------
LPS_EVALS = {"evaluations": [L["lpsbench_evaluations"].format(model=m, variant=v) for m, v in LPS.runs(config)]}


rule lpsbench_stats:
    localrule: True   # no model call: on a cluster it runs in the main Snakemake process
    input: lps_cases=L["lpsbench_cases"], excluded=L["lpsbench_excluded"], **LPS_EVALS
    output: **{name: L[f"lpsbench_stats_{name}"] for name in LPS.STATS}
    params: ins=S.in_args(LPS_EVALS), outs=lambda wc, output: S.out_args(output)
    log: f"{LOGS}/lpsbench_stats/lpsbench_stats.log"
    shell: "{AURA} lpsbench-stats --configfile {CONFIGFILE} --in cases={input.lps_cases} --in excluded={input.excluded} {params.ins} {params.outs} 2> {log}"


# ---- case generation (paper §3.2): drafts checked in code, then a person's review ---------------------------
LPS_GEN = LPSC["generate"]


rule lpsbench_generate:
    input:
        prompts=[S.prompt_file("generate_templates"), S.prompt_file("generate_designer"), S.prompt_file("generate_tools"),
                 S.prompt_file("generate_criterion")],
        feedback=[LPS_GEN["feedback"]] if LPS_GEN.get("feedback") else [],
    output: drafts=L["lpsbench_generate_drafts"], exclusions=L["lpsbench_generate_exclusions"]
    params: cfg=lps_model_hash(LPS_GEN.get("generator")),
            generate=S.section_hash({k: v for k, v in LPS_GEN.items() if k not in ("enabled", "review")})
    resources: **S.endpoint_resources(config, lambda wc: LPS_GEN["generator"])
    log: main=f"{LOGS}/lpsbench_generate/lpsbench_generate.log", calls=f"{LOGS}/lpsbench_generate/lpsbench_generate.calls.jsonl"
    shell: "{AURA} lpsbench-generate --configfile {CONFIGFILE} --out drafts={output.drafts} --out exclusions={output.exclusions} --calls-log {log.calls} 2> {log.main}"


rule lpsbench_review_cases:
    localrule: True   # no model call: on a cluster it runs in the main Snakemake process
    input: drafts=L["lpsbench_generate_drafts"], review=[LPS_GEN["review"]] if LPS_GEN.get("review") else []
    output:
        cases=directory(L["lpsbench_generated_cases"]), reviews=L["lpsbench_generate_reviews"],
        feedback=L["lpsbench_generate_feedback"],
    log: f"{LOGS}/lpsbench_review_cases/lpsbench_review_cases.log"
    shell: "{AURA} lpsbench-review-cases --configfile {CONFIGFILE} --in drafts={input.drafts} --out cases={output.cases} --out reviews={output.reviews} --out feedback={output.feedback} 2> {log}"
