# The reproduction report (docs/reproducing.md): the paper's reported numbers (src/aura/families/aura/reference/)
# beside the run's statistics, a verdict each, and the paper checked against itself. No model call; on demo data
# or the embedded model every row is "not comparable: demo data". The render rule comes from the manifest.
import aura.families.aura as AURA_FAMILY_PKG

AURA_REFERENCE = sorted(str(p) for p in (Path(AURA_FAMILY_PKG.__file__).parent / "reference").iterdir()
                        if p.suffix in (".csv", ".yaml"))
# The optional analyses' tables (the stage declares them without a layout key): an input only where the config
# makes the table, i.e. where its report renders (S.report_enabled); one left out is "not produced".
AURA_REPRODUCE_OPTIONAL = {name: L[name] for name, key in AURA_FAMILY_PKG.STAGES["reproduce"].inputs.items()
                           if key is None and S.report_enabled(config, name)}


rule reproduce:
    localrule: True   # no model call: on a cluster it runs in the main Snakemake process
    input: **S.inputs(config, "reproduce", rerun={"reference": AURA_REFERENCE}, **AURA_REPRODUCE_OPTIONAL)
    output: **S.outputs(config, "reproduce")
    params: io=S.io, cfg=S.section_hash(config["aura"]["roles"], config["paths"].get("seeds"))
    log: f"{LOGS}/reproduce/reproduce.log"
    shell: S.command("reproduce")
