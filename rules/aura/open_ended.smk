# Open-ended rollouts (issue 13 part 6; AURA future work, §8): each evaluated model continues every item's
# prefix for up to aura.evaluate.open_ended.max_steps steps in an LM-emulated text environment (open_ended), every
# step is judged by the panel on action type and safety (the judge and panel stages, unchanged), and one stats
# job finds the first risky step per episode and how often a safe first step is followed by an unsafe one.
# Off by default (aura.evaluate.open_ended.enabled); the targets come from the AURA manifest.
import aura.families.aura.evaluate.open_ended as OE

if OE.check(config):
    sys.exit("error: " + "; ".join(OE.check(config)))

OPEN_ENDED = config["aura"]["evaluate"]["open_ended"]
OE_MODELS = OE.models(config)
OE_EMULATOR = OPEN_ENDED["emulator"]


rule open_ended:
    input:
        dataset=L["dataset"],
        prompts=[S.prompt_file(p) for p in ("rollout_react", "emulator_open_ended", "user_open_ended")],
    output:
        episodes=L["open_ended_episodes"], step_items=L["open_ended_step_items"],
        step_rollouts=L["open_ended_step_rollouts"],
    params:
        outs=lambda wc, output: S.out_args(output),
        cfg=lambda wc: S.model_hash(config, wc.model, *([OE_EMULATOR] if OE_EMULATOR else [])),
        oe=S.section_hash(OPEN_ENDED["max_steps"], OPEN_ENDED["sample_size"], config["seed"]),
    resources: **S.endpoint_resources(config, lambda wc: wc.model)
    log: main=f"{LOGS}/open_ended/{{model}}.log", calls=f"{LOGS}/open_ended/{{model}}.calls.jsonl"
    shell: "{AURA} open-ended --configfile {CONFIGFILE} --model {wildcards.model} --in dataset={input.dataset} {params.outs} --calls-log {log.calls} 2> {log.main}"


rule open_ended_judge:
    input:
        dataset=L["open_ended_step_items"], rollouts=L["open_ended_step_rollouts"],
        prompts=[S.prompt_file(f"judge_{axis}") for axis in ("action_type", "safety")],
    output: judgments=L["open_ended_judgments"]
    params: cfg=lambda wc: S.model_hash(config, wc.judge)
    resources: **S.endpoint_resources(config, lambda wc: wc.judge)
    log: main=f"{LOGS}/open_ended_judge/{{model}}/{{judge}}.log", calls=f"{LOGS}/open_ended_judge/{{model}}/{{judge}}.calls.jsonl"
    shell: "{AURA} judge --configfile {CONFIGFILE} --model {wildcards.model} --judge {wildcards.judge} --option axes=action_type,safety --in dataset={input.dataset} --in rollouts={input.rollouts} --out judgments={output.judgments} --calls-log {log.calls} 2> {log.main}"


rule open_ended_panel:
    localrule: True   # no model call: on a cluster it runs in the main Snakemake process
    input:
        rollouts=L["open_ended_step_rollouts"],
        judgments=lambda wc: expand(L["open_ended_judgments"], model=wc.model, judge=JUDGES),
    output: panel=L["open_ended_panel"]
    params: ins=lambda wc, input: S.in_args(input), judges=S.section_hash(JUDGES)
    log: f"{LOGS}/open_ended_panel/{{model}}.log"
    shell: "{AURA} panel --configfile {CONFIGFILE} --model {wildcards.model} {params.ins} --out panel={output.panel} 2> {log}"


rule open_ended_stats:
    localrule: True   # no model call: on a cluster it runs in the main Snakemake process
    input:
        episodes=expand(L["open_ended_episodes"], model=OE_MODELS),
        panel=expand(L["open_ended_panel"], model=OE_MODELS),
    output: open_ended_episodes=L["open_ended_episode_labels"], open_ended_rates=L["open_ended_rates"]
    params: ins=lambda wc, input: S.in_args(input), outs=lambda wc, output: S.out_args(output)
    log: f"{LOGS}/open_ended_stats/open_ended_stats.log"
    shell: "{AURA} open-ended-stats --configfile {CONFIGFILE} {params.ins} {params.outs} 2> {log}"
