"""A reviewer's path at full size: a finished rehearsal's response cache packed as a release packs it, then a
fresh clone rebuilds one figure from it, then everything, with no server running, and compares the outputs.

    .venv/bin/python bench/reviewer_rebuild.py --rehearsal rehearsal/aura-paper \
        --target figures/paper/construction_funnel.png [--cores 2] [--work /tmp/aura-reviewer]

Steps, each timed: `aura cache export` of the rehearsal (the archive's size and entries); `git clone` of this
repository's HEAD into an empty folder and the README's install (scripts/bootstrap.sh); the rehearsal's config
with its output folders moved into the clone (its endpoints, and so its cache keys, unchanged; nothing listens on
them, so a request that missed the cache would fail the run); `aura cache import`; Snakemake for the target alone
(given relative to the rehearsal's folder), then for `all`. Then: the requests the clone's jobs sent to a server
(call logs, cache_hit false: should be 0), and every file of the rehearsal's results/ and figures/ compared with
the clone's byte for byte (provenance sidecars without the facts of where, when and from which commit they ran:
``run``, ``git``, ``config_hash``, their paths read relative to their folders).
Prints the figures and exits 0 whatever they show.
"""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import yaml

from aura.provenance import without_run

ROOT = Path(__file__).resolve().parents[1]
OUTPUTS = ("interim", "processed", "results", "figures", "cache", "logs")


def timed(label: str, cmd: list[str], cwd: Path) -> float:
    start = time.monotonic()
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    took = time.monotonic() - start
    print(f"bench: {label}: rc {proc.returncode}, {took:.1f} s", flush=True)
    if proc.returncode:
        print(proc.stdout[-3000:], proc.stderr[-3000:], sep="\n", flush=True)
    return took


SIDECAR_FACTS = ("git", "config_hash")  # beside `run` (provenance.without_run): which commit, which paths


def same(a: Path, b: Path, roots: list[tuple[str, str]]) -> bool:
    """Byte for byte; a provenance sidecar without the facts of the run that wrote it, its input paths read
    relative to their folders (``roots``: the rehearsal's and the clone's path of each output folder)."""
    if a.name.endswith(".prov.json"):
        def load(p: Path, side: int) -> dict:
            text = p.read_text()
            for pair in roots:
                text = text.replace(pair[side], "<" + pair[2] + ">")
            return {k: v for k, v in without_run(json.loads(text)).items() if k not in SIDECAR_FACTS}
        return load(a, 0) == load(b, 1)
    return a.read_bytes() == b.read_bytes()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rehearsal", required=True, type=Path)
    ap.add_argument("--target", required=True, help="a file of the rehearsal, relative to its folder")
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--work", type=Path, default=Path("/tmp/aura-reviewer"))
    ap.add_argument("--compare-only", action="store_true", help="compare the outputs of an earlier run in --work")
    args = ap.parse_args()
    folder = args.rehearsal.resolve()
    derived = yaml.safe_load((folder / "config.yaml").read_text())
    clone = args.work / "clone"
    config = dict(derived)
    config["paths"] = {**derived["paths"], **{k: str(clone / "rebuilt" / k) for k in OUTPUTS}}
    if not args.compare_only:
        rebuild(args, folder, derived, clone, config)
    compare(derived, config, clone)
    return 0


def rebuild(args, folder: Path, derived: dict, clone: Path, config: dict) -> None:
    shutil.rmtree(args.work, ignore_errors=True)
    args.work.mkdir(parents=True)
    archive = args.work / "cache.tar.gz"
    py = sys.executable
    timed("cache export", [py, "-m", "aura", "cache", "export", "--configfile", str(folder / "config.yaml"),
                           "--out", str(archive)], ROOT)
    print(f"bench: archive {archive.stat().st_size / 2 ** 20:.1f} MB", flush=True)
    timed("git clone", ["git", "clone", "--quiet", str(ROOT), str(clone)], args.work)
    timed("install (scripts/bootstrap.sh)", ["bash", "scripts/bootstrap.sh"], clone)
    reviewer = clone / "reviewer.yaml"
    reviewer.write_text(yaml.safe_dump(config, sort_keys=False))
    vpy, snake = str(clone / ".venv/bin/python"), str(clone / ".venv/bin/snakemake")
    timed("cache import", [vpy, "-m", "aura", "cache", "import", str(archive), "--configfile", str(reviewer)], clone)
    rel = Path(args.target)
    key = next(k for k in ("figures", "results") if Path(derived["paths"][k]).resolve() in (folder / rel).parents)
    target = Path(config["paths"][key]) / (folder / rel).relative_to(Path(derived["paths"][key]).resolve())
    base = ["--cores", str(args.cores), "--configfile", str(reviewer)]
    timed(f"one target ({rel})", [snake, str(target), *base], clone)
    timed("all", [snake, "all", *base], clone)


def compare(derived: dict, config: dict, clone: Path) -> None:
    sent = 0
    for log in (clone / "rebuilt" / "logs").rglob("*.calls.jsonl"):
        sent += sum(1 for line in log.read_text().splitlines() if line and not json.loads(line).get("cache_hit"))
    print(f"bench: requests the clone's jobs sent to a server: {sent}", flush=True)
    roots = sorted(((str(Path(derived["paths"][k]).resolve()), config["paths"][k], k) for k in OUTPUTS),
                   key=lambda r: -len(r[0]))
    counts = {"identical": 0, "different": [], "missing": []}
    for key in ("results", "figures"):
        mine, theirs = Path(derived["paths"][key]), Path(config["paths"][key])
        for a in sorted(p for p in mine.rglob("*") if p.is_file()):
            b = theirs / a.relative_to(mine)
            if not b.is_file():
                counts["missing"].append(str(a.relative_to(mine)))
            elif same(a, b, roots):
                counts["identical"] += 1
            else:
                counts["different"].append(str(a.relative_to(mine)))
    print(f"bench: outputs compared: {counts['identical']} identical, {len(counts['different'])} different, "
          f"{len(counts['missing'])} missing in the clone", flush=True)
    for name in (counts["different"] + counts["missing"])[:20]:
        print(f"bench:   {name}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
