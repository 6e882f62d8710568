# Rendering: one papermill notebook per figure (and the tables it goes with), reading only
# produced files. `snakemake figures/<name>.pdf` re-renders just that one, with no model call.
FIGS = L["figures"]
TABLES = L["tables"]

for _name, _spec in S.REPORTS.items():

    rule:
        name: f"render_{_name}"
        input: **S.report_inputs(config, _name)
        output:
            pdf=report(f"{FIGS}/{_name}.pdf", caption=f"../report/{_name}.rst", category="Figures"),
            png=f"{FIGS}/{_name}.png",
            tables=[f"{TABLES}/{t}.{ext}" for t in _spec.get("tables", []) for ext in ("csv", "md")],
        params: args=S.report_params(config, _name)
        log: notebook=f"{LOGS}/render/{_name}.ipynb", main=f"{LOGS}/render/{_name}.log"
        shell: "{PAPERMILL} --no-progress-bar {input.notebook} {log.notebook} {params.args} -p out_pdf {output.pdf} -p out_png {output.png} -p tables_dir " + TABLES + " > {log.main} 2>&1"
