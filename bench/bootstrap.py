"""Time the seed-clustered bootstrap (Table 31): vectorised ``table31`` vs a naive per-resample pandas loop.

Synthetic judged table shaped like the paper's: M models x 1,249 rows, 152 source seeds (~8 rows each),
half NSP / half SP, about 30% Unsafe on NSP and 10% on SP, 2% unresolved safety labels.

The vectorised path runs in full (all models, 10,000 resamples, seed 42 per model). The naive loop
(``clustered_diff_reference``: per resample, concatenate the drawn seeds' rows with pandas and recompute the
rates) runs for ONE model with a few resamples; its time is scaled linearly to all models x 10,000 resamples.
The two are also compared on that measured subset (same seed, same draws). Prints figures and exits 0.

    .venv/bin/python bench/bootstrap.py [--models 20] [--rows 1249] [--seeds 152] [--resamples 10000]
                                        [--naive-resamples 200]
"""
from __future__ import annotations

import argparse
import os
import platform
import time

import numpy as np
import pandas as pd

from aura.families.aura.stats.bootstrap import clustered_diff, clustered_diff_reference, table31


def synthetic(models: int, rows: int, seeds: int, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    seed_of_row = np.sort(np.concatenate([np.arange(seeds), rng.integers(0, seeds, size=rows - seeds)]))
    label = np.where(np.arange(rows) % 2 == 0, "NSP", "SP")
    items = pd.DataFrame({"item_id": [f"it{i:05d}" for i in range(rows)],
                          "seed_id": [f"S{s:03d}" for s in seed_of_row], "pair_label": label})
    parts = []
    for m in range(models):
        p_unsafe = np.where(label == "NSP", 0.30, 0.10)
        safety = np.where(rng.random(rows) < p_unsafe, "Unsafe", "Safe").astype(object)
        safety[rng.random(rows) < 0.02] = "unresolved"
        parts.append(items.assign(model=f"model{m:02d}", safety=safety))
    return pd.concat(parts, ignore_index=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", type=int, default=20)
    ap.add_argument("--rows", type=int, default=1249)
    ap.add_argument("--seeds", type=int, default=152)
    ap.add_argument("--resamples", type=int, default=10_000)
    ap.add_argument("--naive-resamples", type=int, default=200)
    ap.add_argument("--seed", type=int, default=42)
    args = ap.parse_args()

    df = synthetic(args.models, args.rows, args.seeds)
    print(f"data: {args.models} models x {args.rows} rows, {args.seeds} seeds; "
          f"NSP unsafe {np.mean(df.loc[df.pair_label == 'NSP', 'safety'] == 'Unsafe'):.3f}, "
          f"SP unsafe {np.mean(df.loc[df.pair_label == 'SP', 'safety'] == 'Unsafe'):.3f}, "
          f"unresolved {np.mean(df.safety == 'unresolved'):.3f}")
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, numpy {np.__version__}, "
          f"pandas {pd.__version__}")

    t0 = time.perf_counter()
    t31 = table31(df, n_resamples=args.resamples, seed=args.seed)
    vec_s = time.perf_counter() - t0
    print(f"vectorised table31: {args.models} models x {args.resamples} resamples in {vec_s:.3f} s")

    one = df[df["model"] == "model00"]
    t0 = time.perf_counter()
    ref = clustered_diff_reference(one, n_resamples=args.naive_resamples, seed=args.seed, return_samples=True)
    naive_s = time.perf_counter() - t0
    scale = (args.models * args.resamples) / args.naive_resamples
    naive_ext = naive_s * scale
    print(f"naive pandas loop: 1 model x {args.naive_resamples} resamples measured in {naive_s:.3f} s; "
          f"scaled linearly x{scale:g} to {args.models} models x {args.resamples} resamples: {naive_ext:.1f} s "
          f"(extrapolated, not run)")
    print(f"speed-up (extrapolated naive / vectorised): {naive_ext / vec_s:,.0f}x")

    fast = clustered_diff(one, n_resamples=args.naive_resamples, seed=args.seed, return_samples=True)
    worst = max(float(np.nanmax(np.abs(fast["samples"][k] - ref["samples"][k]))) for k in ("nsp", "sp", "diff"))
    same_nan = all(np.array_equal(np.isnan(fast["samples"][k]), np.isnan(ref["samples"][k]))
                   for k in ("nsp", "sp", "diff"))
    ci = [(fast[f"diff_ci_{s}"], ref[f"diff_ci_{s}"]) for s in ("low", "high")]
    print(f"agreement on the measured subset (model00, {args.naive_resamples} resamples, seed {args.seed}): "
          f"max |vectorised - naive| over resampled rates = {worst:.3g}, NaN pattern equal: {same_nan}, "
          f"diff CI vectorised [{ci[0][0]:.6f}, {ci[1][0]:.6f}] vs naive [{ci[0][1]:.6f}, {ci[1][1]:.6f}]")
    r = t31.iloc[0]
    print(f"model00 at {args.resamples} resamples: NSP {r.nsp_rate:.4f} SP {r.sp_rate:.4f} diff {r['diff']:.4f} "
          f"CI [{r.diff_ci_low:.4f}, {r.diff_ci_high:.4f}], {r.n_seeds} seeds, {r.n_excluded} rows excluded")


if __name__ == "__main__":
    main()
