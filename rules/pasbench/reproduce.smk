# PaSBench's reproduction report (docs/reproducing.md): the paper's reported numbers
# (src/aura/families/pasbench/reference/) beside the run's stats, a verdict each, and the paper checked against
# itself. No model call; on demo data or the embedded model every row is "not comparable: demo data". The
# render rule comes from the manifest.
import aura.families.pasbench as PAS_FAMILY_PKG

PAS_REFERENCE = sorted(str(p) for p in (Path(PAS_FAMILY_PKG.__file__).parent / "reference").iterdir()
                       if p.suffix in (".csv", ".yaml"))
# what the lookup reads from the config: the roster, the data, the models marked unavailable
PAS_REPRO_HASH = S.section_hash(PAS["evaluated"], PAS["judge"], PAS["data"],
                                {m: v.get("unavailable") for m, v in config["models"].items()})

if PB.evaluated(config):
    rule pasbench_reproduce:
        localrule: True   # no model call: on a cluster it runs in the main Snakemake process
        # the probes' tables only when their probe is on
        input: **S.inputs(config, "pasbench-reproduce", only=["items", *PB.stats_outputs(config)], rerun={"reference": PAS_REFERENCE})
        output: **S.outputs(config, "pasbench-reproduce")
        params: io=S.io, cfg=PAS_REPRO_HASH
        log: f"{LOGS}/pasbench_reproduce/pasbench_reproduce.log"
        shell: S.command("pasbench-reproduce")
