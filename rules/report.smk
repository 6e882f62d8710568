# Rendering: one papermill notebook per figure or table (or a small group), reading only produced
# files (the manifest is REPORTS in src/aura/pipeline/rules_support.py). `snakemake
# figures/<name>.pdf` or `snakemake results/tables/<name>.md` re-renders just that one, with no
# model call.
FIGS = L["figures"]
TABLES = L["tables"]

for _name, _spec in S.REPORTS.items():

    rule:
        name: f"render_{_name}"
        input: **S.report_inputs(config, _name)
        output: **S.report_outputs(config, _name)
        params: args=S.report_params(config, _name)
        log: notebook=f"{LOGS}/render/{_name}.ipynb", main=f"{LOGS}/render/{_name}.log"
        shell: "{AURA} render {input.notebook} {log.notebook} {params.args} > {log.main} 2>&1"
