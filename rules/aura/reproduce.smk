# The reproduction report (docs/reproducing.md): the paper's reported numbers (src/aura/families/aura/reference/)
# beside the run's statistics, a verdict each, and the paper checked against itself. No model call; on demo data
# or the embedded model every row is "not comparable: demo data". The render rule comes from the manifest.
import aura.families.aura as AURA_FAMILY_PKG

AURA_REFERENCE = sorted(str(p) for p in (Path(AURA_FAMILY_PKG.__file__).parent / "reference").iterdir()
                        if p.suffix in (".csv", ".yaml"))


rule reproduce:
    localrule: True   # no model call: on a cluster it runs in the main Snakemake process
    input:
        reference=AURA_REFERENCE,
        **{name: L[name] for name in ("table33_overall", "table35_flips", "table36_failure_mechanism",
                                      "table31_bootstrap", "table32_matched_pairs")},
        composition=L["construction_composition"],
    output: verdicts=L["reproduction"], findings=L["reproduction_consistency"]
    params: ins=lambda wc, input: S.in_args(input), cfg=S.section_hash(config["aura"]["roles"], config["paths"].get("seeds"))
    log: f"{LOGS}/reproduce/reproduce.log"
    shell: "{AURA} reproduce --configfile {CONFIGFILE} {params.ins} --out verdicts={output.verdicts} --out findings={output.findings} 2> {log}"
