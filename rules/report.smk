# Rendering: one papermill notebook per figure/table, reading only produced files.
# `snakemake figures/<name>.pdf` re-renders just that one, with no model call.
FIGS = L["figures"]

wildcard_constraints:
    name="|".join(S.REPORTS),


rule render_figure:
    input: unpack(lambda wc: S.report_inputs(config, wc.name))
    output:
        pdf=report(f"{FIGS}/{{name}}.pdf", caption="../report/caption.rst", category="Figures"),
        png=f"{FIGS}/{{name}}.png",
    params: args=lambda wc: S.report_params(config, wc.name)
    log: notebook=f"{LOGS}/render_figure/{{name}}.ipynb", main=f"{LOGS}/render_figure/{{name}}.log"
    shell: "{PAPERMILL} --no-progress-bar {input.notebook} {log.notebook} {params.args} -p out_pdf {output.pdf} -p out_png {output.png} > {log.main} 2>&1"
