# LPS-Bench's reproduction report (docs/reproducing.md): the paper's Tables 3 and 4
# (src/aura/families/lpsbench/reference/) beside the run's raw Safe Rates, a verdict per cell, and the paper
# checked against itself. No model call; on demo data or the embedded model every row is "not comparable: demo
# data". The render rule comes from the manifest.
LPS_REFERENCE = sorted(str(p) for p in (Path(LPS.__file__).parent / "reference").iterdir()
                       if p.suffix in (".csv", ".yaml"))
LPS_REPRO_IN = {name: L[f"lpsbench_stats_{name}"] for name in ("safe_rate_by_risk", "safe_rate_by_domain")}
# what the lookup and the demo-data rule read from the config: the roster, the cases, the models that judge or emulate
LPS_REPRO_HASH = S.section_hash(LPSC["evaluated"], LPSC["evaluator"], LPSC["emulator"], LPSC["cases"], LPSC["tools"])

if LPS.evaluated(config):
    rule lpsbench_reproduce:
        localrule: True   # no model call: on a cluster it runs in the main Snakemake process
        input: reference=LPS_REFERENCE, **LPS_REPRO_IN
        output: verdicts=L["lpsbench_reproduction"], findings=L["lpsbench_reproduction_consistency"]
        params: ins=S.in_args({"reference": LPS_REFERENCE, **LPS_REPRO_IN}), cfg=LPS_REPRO_HASH
        log: f"{LOGS}/lpsbench_reproduce/lpsbench_reproduce.log"
        shell: "{AURA} lpsbench-reproduce --configfile {CONFIGFILE} {params.ins} --out verdicts={output.verdicts} --out findings={output.findings} 2> {log}"
