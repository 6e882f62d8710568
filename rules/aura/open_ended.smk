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
    input: **S.inputs(config, "open-ended")
    output: **S.outputs(config, "open-ended")
    params:
        io=S.io,
        cfg=lambda wc: S.model_hash(config, wc.model, *([OE_EMULATOR] if OE_EMULATOR else [])),
        oe=S.section_hash(OPEN_ENDED["max_steps"], OPEN_ENDED["sample_size"], config["seed"]),
    resources: **S.endpoint_resources(config, lambda wc: wc.model)
    log: main=f"{LOGS}/open_ended/{{model}}.log", calls=f"{LOGS}/open_ended/{{model}}.calls.jsonl"
    shell: S.command("open-ended", model="{wildcards.model}")


rule open_ended_judge:
    input:
        **S.inputs(config, "judge", dataset=L["open_ended_step_items"], rollouts=L["open_ended_step_rollouts"],
                   prompts=["judge_action_type", "judge_safety"]),
    output: **S.outputs(config, "judge", judgments=L["open_ended_judgments"])
    params: io=S.io, cfg=lambda wc: S.model_hash(config, wc.judge)
    resources: **S.endpoint_resources(config, lambda wc: wc.judge)
    log: main=f"{LOGS}/open_ended_judge/{{model}}/{{judge}}.log", calls=f"{LOGS}/open_ended_judge/{{model}}/{{judge}}.calls.jsonl"
    shell: S.command("judge", model="{wildcards.model}", judge="{wildcards.judge}", options={"axes": "action_type,safety"})


rule open_ended_panel:
    localrule: True   # no model call: on a cluster it runs in the main Snakemake process
    input:
        **S.inputs(config, "panel", rollouts=L["open_ended_step_rollouts"],
                   judgments=lambda wc: expand(L["open_ended_judgments"], model=wc.model, judge=JUDGES)),
    output: **S.outputs(config, "panel", panel=L["open_ended_panel"])
    params: io=S.io, judges=S.section_hash(JUDGES)
    log: f"{LOGS}/open_ended_panel/{{model}}.log"
    shell: S.command("panel", model="{wildcards.model}")


rule open_ended_stats:
    localrule: True   # no model call: on a cluster it runs in the main Snakemake process
    input:
        **S.inputs(config, "open-ended-stats", episodes=expand(L["open_ended_episodes"], model=OE_MODELS),
                   panel=expand(L["open_ended_panel"], model=OE_MODELS)),
    output: **S.outputs(config, "open-ended-stats")
    params: io=S.io
    log: f"{LOGS}/open_ended_stats/open_ended_stats.log"
    shell: S.command("open-ended-stats")
