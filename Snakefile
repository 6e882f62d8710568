# AURA-Eval workflow: a thin layer over the `aura` package. Rules hold the DAG (wildcards, expansions,
# resources, rerun hashes); each calls `python -m aura <stage>` with the command line its stage's declaration
# gives (aura.pipeline.stage.Stage via S.inputs, S.outputs, S.command), logs under logs/<rule>/. Rule helpers
# live in the package (aura.pipeline.rules_support, each family's dag.py), never as `def`s in rule files.
# Default config: config/config.yaml (embedded local model, offline). Another config:
#   snakemake --cores 8 all --configfile config/paper.yaml
import os
import re
import sys
import time
from pathlib import Path

from snakemake.utils import min_version

min_version("8.20")
sys.path.insert(0, str(Path(workflow.basedir) / "src"))

from aura.config import UserError, config_hash, workflow_config
from aura.pipeline.rate_timers import daemon_rate_timers
from aura.quick_exit import skip_final_collections

# Snakemake's process (a run, a dry run, a cluster job step) exits without walking its heap twice more: 0.4-0.5 s
# of CPU each (aura/quick_exit.py).
skip_final_collections()
daemon_rate_timers()  # the job rate limit's timers never keep a finished run alive (aura/pipeline/rate_timers.py)

if not workflow.overwrite_configfiles:
    configfile: "config/config.yaml"
# The package reads the same config Snakemake read, with `extends: base.yaml` merged the same way, and
# checks it against the schema composed from the shared keys and every family's section (defaults
# filled). `--config key=value` (a section: --config 'aura={construct: {max_seeds: 3}}') is merged in,
# checked, and written under .snakemake/aura/ named by its hash: CONFIGFILE is then that file, so no
# job ignores it.
CONFIGFILE = workflow.overwrite_configfiles[-1] if workflow.overwrite_configfiles else "config/config.yaml"
try:
    _raw, CONFIGFILE = workflow_config(CONFIGFILE, workflow.config_settings.config, ".snakemake/aura")
except UserError as exc:  # a config mistake or a family that cannot be registered: one line, no traceback
    sys.exit(f"error: {exc}")

from aura.families import enabled
from aura.pipeline import rules_support as S
from aura.pipeline.layout import layout

config.clear()
config.update(_raw)
CONFIG_HASH = config_hash(config)  # what every job's load_config(CONFIGFILE).hash reads: renders' sidecars take it

L = layout(config)
LOGS = config["paths"]["logs"]
AURA = f"{sys.executable} -m aura"
# The run holds a lease on the shared embedded llama.cpp server (aura.llm.local_server): it stays up
# between jobs and stops as soon as this process ends, however it ends (kill -9 included): AURA_RUN_PID.
# The jobs run in children of one warm process of the run, which imported the package, pandas, matplotlib and
# papermill once (aura.pipeline.jobserver; the first job starts it, none in a dry run): AURA_JOB_SERVER names its
# folder. Each job is still its own process, log and exit status. AURA_JOB_SERVER=off: every job imports alone.
from aura.pipeline.jobserver import hold_run, run_folder

hold_run(workflow)
run_folder(workflow)
S.register_endpoint_resources(workflow, config)

FAMILIES = enabled(config)

# Every enabled benchmark family's rules: the *.smk files of its rules folder, in name order (the
# built-in families: rules/<family>/; a family installed from elsewhere carries its own). A family that
# brings no rule file gets one rule per stage, derived from the stage's declaration (S.stage_rule).
for _family in FAMILIES:
    _rules = Path(S.workflow_path(_family.rules_dir))
    _smks = sorted((_rules if _rules.is_absolute() else Path(workflow.basedir) / _rules).glob("*.smk"))
    for _smk in _smks:
        include: S.workflow_path(_smk) if _rules.is_absolute() else str(_rules / _smk.name)
    for _stage in ([] if _smks else _family.stages):
        try:
            _r = S.stage_rule(config, _family, _stage)
        except ValueError as exc:
            sys.exit(f"error: {exc}")
        if _r is None:
            continue

        rule:
            name: _r["name"]
            input: **_r["input"]
            output: **_r["output"]
            params: **_r["params"]
            resources: **_r["resources"]
            log: **_r["log"]
            shell: _r["shell"]


# Rendering, the same for every enabled family: one papermill notebook per figure or table (or a
# small group), reading only produced files (each family's `reports` manifest; the caption is
# <the family's report folder>/<name>.rst). `snakemake figures/<name>.pdf` or `snakemake results/tables/<name>.md`
# re-renders just that one, with no model call.
for _family in FAMILIES:
    for _name in _family.reports:

        rule:
            name: f"render_{_name}"
            input: **S.report_inputs(config, _name)
            output: **S.report_outputs(config, _name)
            params: args=S.report_params(config, _name)
            group: "render"   # on a cluster: renders share SLURM jobs (group-components in config/profiles/slurm)
            log: notebook=f"{LOGS}/render/{_name}.ipynb", main=f"{LOGS}/render/{_name}.log"
            shell: "{AURA} render {input.notebook} {log.notebook} {params.args} --config-hash {CONFIG_HASH} --outputs {output} > {log.main} 2>&1"


rule all:
    default_target: True
    input: [target for family in FAMILIES for target in family.targets(config)]


# The run viewer as a static site (`python -m aura view --export`: every enabled family's pages), for a
# paper's supplementary material. Not part of `all`; build it after (or with) a run:
#   snakemake --cores 1 view_site      # -> <results>/site/index.html
# Browse a run interactively instead with `python -m aura view --configfile <config>` (127.0.0.1:8765).
rule view_site:
    input: rules.all.input
    output: directory(f"{config['paths']['results']}/site")
    log: f"{LOGS}/view_site/view_site.log"
    shell: "{AURA} view --configfile {CONFIGFILE} --export {output} > {log} 2>&1"


# One line per stage at the end of every run: items ok / unparsed / failed / n/a, failed jobs
# (from the summaries the jobs write under <logs>/summary/). A report: it never changes the outcome.
# Printed in Snakemake's own process (a new interpreter for it cost a one-figure rebuild ~0.8 s).
# STARTED: when this invocation read the Snakefile; the summary says first what ran since, then the folder's totals.
STARTED = time.time()
from aura.pipeline.summary import print_end_of_run

onsuccess:
    print_end_of_run(config, STARTED)

onerror:
    print_end_of_run(config, STARTED)
