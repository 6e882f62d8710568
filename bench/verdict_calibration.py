"""Is the reproduction verdict calibrated? Monte Carlo over every family's mapped reference rows.

For each family (its reference folder, the rows its reproduce stage maps, the n its design fixes where the paper
states none), ``aura.stats.calibration`` draws faithful reruns (the paper's number a draw too) and judges each with
the verdict's own code: the share of reruns with any "not reproduced" (target: <= 5%, family-wise), the mean count
of each outcome; then per row its power against a 15-point shift alone (Holm's first step) and how often a
faithful rerun is "reproduced". Prints one block per family; exits 0 whatever it shows.

    .venv/bin/python bench/verdict_calibration.py [--draws 400] [--power-draws 200] [--shift 0.15] [--seed 0]
"""
from __future__ import annotations

import argparse
import time

import pandas as pd

from aura.stats import calibration as C
from aura.stats.reference import load_reference


def families():
    """(name, reference folder, lookup over an empty run, design_n) of the shipped families."""
    import aura.families.aura.stats.reproduction as A
    import aura.families.lpsbench.reproduction as L
    import aura.families.pasbench.reproduction as P

    empty = lambda names: {n: pd.DataFrame() for n in names}  # noqa: E731
    return [("aura", A.REFERENCE, A.lookup_for(empty(A.INPUTS)), A.design_n),
            ("pasbench", P.REFERENCE, P.lookup_for(empty(P.INPUTS), pd.DataFrame(), {}), P.design_n),
            ("lpsbench", L.REFERENCE, L.lookup_for(empty(L.INPUTS)), None)]


def wilson_text(k: int, n: int) -> str:
    from aura.stats.intervals import wilson

    lo, hi = wilson(k, n)
    return f"{k}/{n} = {k / n:.3f} (95% {lo:.3f}-{hi:.3f})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--draws", type=int, default=400, help="faithful reruns per family")
    ap.add_argument("--power-draws", type=int, default=200, help="shifted reruns per family for the per-row power")
    ap.add_argument("--shift", type=float, default=0.15, help="the shift of the power check (a fraction)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    for name, folder, lookup, design_n in families():
        ref = load_reference(folder)
        fam = C.load_family(folder, C.mapped(ref, lookup).to_numpy())
        sim = C.simulated(fam, design_n)
        t0 = time.perf_counter()
        runs = C.simulate(fam, args.draws, seed=args.seed, design_n=design_n)
        rates = C.row_rates(fam, args.power_draws, seed=args.seed + 1, shift=args.shift, design_n=design_n)
        took = time.perf_counter() - t0
        any_false = int((runs["not reproduced"] > 0).sum())
        tested = rates["power"].notna()
        strong = rates["power"] >= 0.8
        print(f"== {name}: {len(ref)} reference rows, {len(fam.ref)} mapped, {int(sim.sum())} with a sampling model "
              f"({took:.0f} s)")
        print(f"  faithful reruns with any 'not reproduced' (target <= 0.05): {wilson_text(any_false, args.draws)}")
        print("  mean count per faithful rerun: " + ", ".join(f"{o} {runs[o].mean():.2f}" for o in runs.columns))
        print(f"  power against a {100 * args.shift:.0f}-point shift of one row (Holm's first step, "
              f"{args.power_draws} draws): {int(strong.sum())} of {int(tested.sum())} tested rows reach 0.80; "
              f"median {rates.loc[tested, 'power'].median():.2f}")
        by_kind = rates[tested].groupby("kind")["power"].agg(["count", "median", lambda p: int((p >= 0.8).sum())])
        by_kind.columns = ["rows", "median power", "rows >= 0.80"]
        print("  " + by_kind.to_string().replace("\n", "\n  "))
        print(f"  share of faithful reruns 'reproduced', median over rows: "
              f"{rates['reproduced_if_faithful'].median():.2f}")
        weak = rates[tested & ~strong]
        if len(weak) and len(weak) <= 12:
            print("  rows below 0.80: " + "; ".join(f"{r.table} / {r.row} / {r.column} ({r.power:.2f})"
                                                  for r in weak.itertuples()))
        elif len(weak):
            print(f"  rows below 0.80: {len(weak)} (e.g. {weak.iloc[0]['table']} / {weak.iloc[0]['row']} / "
                  f"{weak.iloc[0]['column']}: {weak.iloc[0]['power']:.2f})")


if __name__ == "__main__":
    main()
