# The run viewer as a static site (`python -m aura view --export`, the same pages the served viewer shows:
# items, rollouts, judge votes, LPS-Bench execution records, PaSBench samples, Table 33 linked to its rows),
# for a paper's supplementary material. Not part of `all`; build it after (or with) a run:
#   snakemake --cores 1 view_site      # -> <results>/site/index.html
# Browse a run interactively instead with `python -m aura view --configfile <config>` (127.0.0.1:8765).


rule view_site:
    input: [target for family in FAMILIES for target in family.targets(config)]
    output: directory(f"{config['paths']['results']}/site")
    log: f"{LOGS}/view_site/view_site.log"
    shell: "{AURA} view --configfile {CONFIGFILE} --export {output} > {log} 2>&1"
