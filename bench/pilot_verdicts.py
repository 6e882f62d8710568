"""What a pilot's verdict would read: planted reruns at each pilot config's size, judged by the verdict's own code.

For each `config/pilot_*.yaml`, the reference rows of the models it evaluates (those its reproduce stage maps, with
a sampling model) are drawn as a pilot would produce them: the paper a draw at its n, the pilot at its share of it
(AURA: max_seeds / 157 seeds; LPS-Bench: max_cases / 570 cases; PaSBench: its item caps), once with the paper's
truth (faithful) and once with every row's truth moved by 15 points (planted deviation). Prints per row the share
of draws reproduced / not reproduced / inconclusive. Exits 0 whatever it shows.

    .venv/bin/python bench/pilot_verdicts.py [--draws 200] [--shift 0.15] [--seed 0]
"""
from __future__ import annotations

import argparse

import pandas as pd

from aura.config import load_config
from aura.stats import calibration as C
from aura.stats.reference import load_reference
from aura.stats.verdict import INCONCLUSIVE, NOT_REPRODUCED, REPRODUCED
from verdict_calibration import families

UPSTREAM = {"aura": 157, "lpsbench": 570}  # seeds, cases of the paper's full run


def plan(name: str, raw: dict) -> tuple[list[str], float]:
    """The models a pilot config evaluates and its run's share of the paper's n."""
    if name == "aura":
        section = raw["aura"]
        cap = (section.get("construct") or {}).get("max_seeds")
        return section["roles"]["evaluated"], min(1.0, cap / UPSTREAM["aura"]) if cap else 1.0
    if name == "lpsbench":
        section = raw["lpsbench"]
        cap = section.get("max_cases")
        return section["evaluated"], min(1.0, cap / UPSTREAM["lpsbench"]) if cap else 1.0
    section = raw["pasbench"]
    caps = [v for v in (section.get("max_items") or {}).values() if v]
    return section["evaluated"], min(1.0, min(caps) / 288) if caps else 1.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--draws", type=int, default=200)
    ap.add_argument("--shift", type=float, default=0.15)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    pd.set_option("display.width", 200)
    for name, folder, lookup, design_n in families():
        raw = load_config(f"config/pilot_{name}.yaml").raw
        models, share = plan(name, raw)
        ref = load_reference(folder)
        keep = C.mapped(ref, lookup) & ref["model"].isin(models)
        fam = C.load_family(folder, keep.to_numpy())
        print(f"== pilot_{name}.yaml: {len(models)} models, the run's n {share:.0%} of the paper's; "
              f"{int(C.simulated(fam, design_n).sum())} rows with a sampling model")
        cols = ["table", "row", "column", "kind"]
        faithful = C.outcome_shares(fam, args.draws, args.seed, 0.0, design_n, share)
        shifted = C.outcome_shares(fam, args.draws, args.seed + 1, args.shift, design_n, share)
        out = faithful[cols].assign(faithful_reproduced=faithful[REPRODUCED],
                                    faithful_inconclusive=faithful[INCONCLUSIVE],
                                    faithful_not_reproduced=faithful[NOT_REPRODUCED],
                                    shifted_not_reproduced=shifted[NOT_REPRODUCED])
        print(out.round(2).to_string(index=False))


if __name__ == "__main__":
    main()
