"""Answers paid per distinct request when two runs share one cache folder.

Two copies of the workflow (two checkouts, say) with one `paths.cache` run the AURA family's chain up to the
judge panel against the fake OpenAI server (`aura.simulator.server`, a child process, scripted answers, a fixed
latency per call), started together or `--apart` seconds apart. The server counts every answer it sends; the
distinct requests are the distinct request bodies it received. Printed: answers, distinct requests, answers
per distinct request (1.00 = each request paid once) and the two runs' wall times. Exit code 0 whatever it
shows: a benchmark, not a test.

    .venv/bin/python bench/shared_cache.py [--apart 0] [--latency 0.05] [--cores 2]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "tests"), str(REPO / "src")]

import yaml  # noqa: E402

import scripted  # noqa: E402
from conftest import base_config, copy_workflow  # noqa: E402
from aura.simulator.server import FakeOpenAIServer  # noqa: E402

from aura.pipeline.layout import layout  # noqa: E402


def prepare(root: Path, url: str, cache: Path, seeds: Path) -> tuple[Path, str]:
    """A workflow copy under `root` on the shared `cache`; returns (its folder, the judge panel's file)."""
    copy_workflow(root)
    raw = base_config(url, root / "cache")
    raw["paths"]["cache"] = str(cache)
    raw["paths"]["seeds"] = str(seeds)
    raw["aura"]["evaluate"] = {"shards": 1}
    (root / "config" / "test.yaml").write_text(yaml.safe_dump(raw))
    return root, layout(raw)["panel"].format(model="m")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--apart", type=float, default=0.0, help="seconds between the two runs' starts")
    ap.add_argument("--latency", type=float, default=0.05, help="seconds the fake server takes per answer")
    ap.add_argument("--cores", type=int, default=2, help="snakemake --cores of each run")
    args = ap.parse_args()
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    with tempfile.TemporaryDirectory() as tmp, FakeOpenAIServer(mode="process") as server:
        tmp = Path(tmp)
        server.set_rules([{**rule, "delay": args.latency} for rule in scripted.rules()])
        seeds = scripted.write_seed_dir(tmp / "seeds")
        runs = [prepare(tmp / f"checkout{i}", server.base_url, tmp / "cache", seeds) for i in (1, 2)]
        procs, started = [], []
        for i, (folder, target) in enumerate(runs):
            if i:
                time.sleep(args.apart)
            started.append(time.perf_counter())
            procs.append(subprocess.Popen([sys.executable, "-m", "snakemake", target, "--cores", str(args.cores),
                                           "--configfile", "config/test.yaml"], cwd=folder, env=env,
                                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True))
        walls, codes = [], []
        for proc, t0 in zip(procs, started):
            err = proc.communicate()[1]
            walls.append(time.perf_counter() - t0)
            codes.append(proc.returncode)
            if proc.returncode:
                print(err[-2000:], file=sys.stderr)
        bodies = [json.dumps(r["body"], sort_keys=True) for r in server.requests() if r.get("body")]
        answers, distinct = server.stats()["count"], len(set(bodies))
    print(f"two runs on one cache, started {args.apart:g} s apart, {args.latency:g} s per answer: exit codes {codes}")
    print(f"answers sent by the server: {answers}; distinct requests: {distinct}; "
          f"answers per distinct request: {answers / max(distinct, 1):.2f} (1.00 = each paid once)")
    print(f"wall: run 1 {walls[0]:.1f} s, run 2 {walls[1]:.1f} s")


if __name__ == "__main__":
    main()
