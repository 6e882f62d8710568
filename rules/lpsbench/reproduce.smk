# LPS-Bench's reproduction report (docs/reproducing.md): the paper's Tables 3 and 4
# (src/aura/families/lpsbench/reference/) beside the run's raw Safe Rates, a verdict per cell, and the paper
# checked against itself. No model call; on demo data or the embedded model every row is "not comparable: demo
# data". The render rule comes from the manifest.
LPS_REFERENCE = sorted(str(p) for p in (Path(LPS.__file__).parent / "reference").iterdir()
                       if p.suffix in (".csv", ".yaml"))
# what the lookup and the demo-data rule read from the config: the roster, the cases, the models that judge or emulate
LPS_REPRO_HASH = S.section_hash(LPSC["evaluated"], LPSC["evaluator"], LPSC["emulator"], LPSC["cases"], LPSC["tools"])

if LPS.evaluated(config):
    rule lpsbench_reproduce:
        localrule: True   # no model call: on a cluster it runs in the main Snakemake process
        input: **S.inputs(config, "lpsbench-reproduce", rerun={"reference": LPS_REFERENCE})
        output: **S.outputs(config, "lpsbench-reproduce")
        params: io=S.io, cfg=LPS_REPRO_HASH
        log: f"{LOGS}/lpsbench_reproduce/lpsbench_reproduce.log"
        shell: S.command("lpsbench-reproduce")
