"""A paper config's dress rehearsal at full size, on local copies of the data, optionally killed and resumed.

    .venv/bin/python bench/rehearse_paper.py --configfile config/lpsbench.yaml [--kill-after 600] [--cores 2]
        [--deviate lpsbench:gpt-5:TS=+15] [--folder rehearsal/lpsbench-paper] [--max K=V ...]

The data come from the copies the opt-in tests read (a machine without the archives' hosts):
AURA_RJUDGE_DIR (R-Judge's data folder, <Domain>/*.json), AURA_PASBENCH_DIR (PaSBench's JSON files; the 128
images are not in that copy: stand-ins of the same count are written beside the rehearsal, and the run says so)
and AURA_LPSBENCH_CHECKOUT (an LPS-Bench checkout at the pinned commit: examples/, tools/, agent.py,
evaluator/). A family whose variable is unset keeps the config's own download.

``--kill-after S`` SIGKILLs the whole rehearsal (the simulator, Snakemake and every job) S seconds in, then runs
the same command again, as a user would after a crash: the second run prints the requests the simulator
answered twice over both runs (the ledger ``answered.txt``). Prints each run's `aura rehearse` lines and exits
0 whatever they show.
"""
from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def overlay(folder: Path, limits: dict) -> Path:
    """The local copies' settings, merged over the config by `aura rehearse --overlay`."""
    over: dict = {}
    rjudge, pas, lps = (os.environ.get(k) for k in ("AURA_RJUDGE_DIR", "AURA_PASBENCH_DIR", "AURA_LPSBENCH_CHECKOUT"))
    if rjudge:
        over["paths"] = {"seeds": str(Path(rjudge).resolve())}
        over["aura"] = {"seed_download": {"enabled": False}}
    if lps:
        lps = Path(lps).resolve()
        over["lpsbench"] = {"cases": {"path": str(lps / "examples"), "download": {"enabled": False}},
                            "tools": {"upstream_dir": str(lps)}}
    if pas:
        from aura.families.pasbench.standins import write

        images, counts = write(Path(pas), folder / "standin_images")
        over["pasbench"] = {"data": {"path": str(Path(pas).resolve()), "images": str(images.resolve()),
                                     "sub_images": str(counts.resolve()), "download": {"enabled": False}}}
    for key, value in limits.items():  # --max pasbench.max_items=10: dotted keys
        node = over
        *parents, last = key.split(".")
        for p in parents:
            node = node.setdefault(p, {})
        node[last] = yaml.safe_load(value)
    path = folder / "overlay.yaml"
    folder.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(over, sort_keys=False))
    return path


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--configfile", required=True)
    ap.add_argument("--folder", default=None)
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--kill-after", type=float, default=None)
    ap.add_argument("--deviate", action="append", default=[])
    ap.add_argument("--max", action="append", default=[], help="dotted.key=value merged into the overlay")
    args = ap.parse_args()
    name = yaml.safe_load(Path(args.configfile).read_text()).get("name") or Path(args.configfile).stem
    folder = Path(args.folder or ROOT / "rehearsal" / name)
    limits = dict(kv.split("=", 1) for kv in args.max)
    cmd = [sys.executable, "-m", "aura", "rehearse", "--configfile", args.configfile, "--folder", str(folder),
           "--overlay", str(overlay(folder, limits)), "--cores", str(args.cores),
           *[a for d in args.deviate for a in ("--deviate", d)]]
    print("bench:", " ".join(cmd), flush=True)
    if args.kill_after:
        proc = subprocess.Popen(cmd, start_new_session=True, stdout=subprocess.DEVNULL)
        time.sleep(args.kill_after)
        killed = proc.poll() is None
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        print(f"bench: SIGKILLed the rehearsal's process group after {args.kill_after:g} s"
              + ("" if killed else " (it had already ended)"), flush=True)
        time.sleep(2)  # the killed jobs' tool servers die with them (PR_SET_PDEATHSIG)
    start = time.monotonic()
    rc = subprocess.call(cmd)
    print(f"bench: rc {rc}, {time.monotonic() - start:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
