"""Time the run viewer (`python -m aura view`) at paper size: 1,249 items x 20 models x 3 judges.

Writes a synthetic produced run in the stages' formats (dataset, rollouts, each judge's three labels, the
panel by the panel stage's majority rule) under a temporary folder: 1,249 items over 152 seeds, half NSP /
half SP, 8 domains, 5 dimensions; per model and item each judge votes Unsafe with probability 0.3 (NSP) /
0.1 (SP), 2% of rollouts unparsed, 1% of judge answers unparsed. Then: the time to read the run
(`RunData.load`), and over HTTP (uvicorn on 127.0.0.1, one client) the median and worst response time of
list pages (first page, a deep page, model + label + agreement filters, a text search, a search's next
page), an item page (20 models' rollouts and votes) and the index. With `--export`, also the time and size
of the static site (`export_site`). Prints figures and exits 0.

    .venv/bin/python bench/viewer.py [--items 1249] [--models 20] [--repeats 20] [--export]
"""
from __future__ import annotations

import argparse
import platform
import random
import resource
import statistics
import tempfile
import time
from pathlib import Path

import httpx

from aura.families.aura.evaluate.panel import majority
from aura.io import write_jsonl
from aura.pipeline.layout import layout
from aura.web.serve import serving
from aura.web.viewer.app import make_app
from aura.web.viewer.data import RunData

JUDGES = ["judge-a", "judge-b", "judge-c"]
DOMAINS = ["IoT", "Finance", "Health", "Web", "Email", "Software", "Travel", "Home"]
DIMENSIONS = ["original", "RS1", "RS2", "RS3", "RS4"]
WORDS = "switch device transfer account delete file email send invoice backup door camera patient dose".split()


def write_run(root: Path, n_items: int, n_models: int, seed: int = 0) -> dict:
    rng = random.Random(seed)
    raw = {"paths": {k: str(root / k) for k in ("interim", "processed", "results", "cache", "logs", "figures")},
           "families": ["aura"], "models": {f"model-{i:02d}": {"label": f"Model {i:02d}"} for i in range(n_models)}}
    L = layout(raw)
    items, seeds = [], []
    for s in range(152):
        steps = [{"role": "user", "content": " ".join(rng.choices(WORDS, k=25))},
                 {"role": "agent", "thought": " ".join(rng.choices(WORDS, k=15)), "action": "Tool: {}"},
                 {"role": "environment", "content": " ".join(rng.choices(WORDS, k=40))}]
        seeds.append({"seed_id": f"seed-{s:03d}", "domain": DOMAINS[s % 8], "profile": "You are an assistant.",
                      "steps": steps, "source_label": 1, "scenario": "x", "source_file": "x", "risk_description": "x"})
    for i in range(n_items):
        seed = seeds[i % 152]
        label = "NSP" if i % 2 == 0 else "SP"
        steps = [{"role": "user", "content": seed["steps"][0]["content"] + f" variant {i}"}, *seed["steps"][1:]]
        items.append({"item_id": f"it_{i:05d}", "seed_id": seed["seed_id"], "domain": seed["domain"],
                      "dimension": DIMENSIONS[i % 5], "prefix_kind": "pre_execution", "pair_label": label,
                      "pair_id": f"pr_{i // 2:05d}", "pair_role": "source" if label == "NSP" else "counterpart",
                      "rationale": " ".join(rng.choices(WORDS, k=20)), "profile": seed["profile"], "steps": steps,
                      "model_input": "\n".join(f"[{s['role'].upper()}] {s.get('content') or s.get('thought')}" for s in steps),
                      "safe_action_sketches": [], "unsafe_action_explanation": ""})
    write_jsonl(L["seeds"], seeds)
    write_jsonl(L["dataset"], items)
    for m in raw["models"]:
        rollouts, panel, judgments = [], [], {j: [] for j in JUDGES}
        for it in items:
            ok = rng.random() >= 0.02
            thought = " ".join(rng.choices(WORDS, k=30))
            rollouts.append({"item_id": it["item_id"], "model": m, "status": "ok" if ok else "unparsed",
                             "thought": thought if ok else None, "action": "Tool: {}" if ok else None,
                             "raw": thought, "error": None, "prompt_format": "react"})
            row = {"item_id": it["item_id"], "model": m, "rollout_status": rollouts[-1]["status"]}
            p_unsafe = 0.3 if it["pair_label"] == "NSP" else 0.1
            for axis, choices in (("detection", ["D0", "D1", "D2", "D3"]), ("action_type", ["A0", "A1", "A2", "A3"]),
                                  ("safety", None)):
                if not ok:
                    row[axis], row[f"{axis}_votes"] = "rollout_unparsed", {}
                    continue
                votes = {}
                for j in JUDGES:
                    label = (("Unsafe" if rng.random() < p_unsafe else "Safe") if choices is None else rng.choice(choices))
                    label = None if rng.random() < 0.01 else label
                    votes[j] = label
                    judgments[j].append({"item_id": it["item_id"], "model": m, "judge": j, "axis": axis, "label": label,
                                         "status": "ok" if label else "unparsed", "rationale": "r", "raw": "{}",
                                         "error": None, "run": 0})
                row[axis], row[f"{axis}_votes"] = majority(list(votes.values())), votes
            panel.append(row)
        write_jsonl(L["rollouts"].format(model=m, shard=0), rollouts)
        write_jsonl(L["panel"].format(model=m), panel)
        for j, rows in judgments.items():
            write_jsonl(L["judgments"].format(model=m, judge=j, shard=0), rows)
    return raw


def timed(client: httpx.Client, url: str, repeats: int) -> tuple[float, float, int]:
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        r = client.get(url)
        times.append(time.perf_counter() - t)
        r.raise_for_status()
    return statistics.median(times) * 1000, max(times) * 1000, len(r.content)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--items", type=int, default=1249)
    ap.add_argument("--models", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--export", action="store_true", help="also time the static export")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        raw = write_run(Path(tmp), args.items, args.models)
        print(f"wrote a synthetic run: {args.items} items x {args.models} models x {len(JUDGES)} judges "
              f"in {time.perf_counter() - t:.1f} s")
        t = time.perf_counter()
        data = RunData.load(raw)
        load_s = time.perf_counter() - t
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"RunData.load: {load_s:.1f} s ({len(data.frames['aura'])} rows, "
              f"{sum(len(v) for v in data.parts['aura'].judgments.values())} judge labels); peak RSS {rss:.0f} MiB")
        pages = [("list, first page", "/rows?family=aura"),
                 ("list, page 400", "/rows?family=aura&page=400"),
                 ("filter model+label+agreement", "/rows?family=aura&model=model-07&label=Unsafe&agreement=majority"),
                 ("filter pair label + label=excluded", "/rows?family=aura&pair_label=NSP&label=excluded"),
                 ("search 'variant 1234'", "/rows?family=aura&q=variant+1234"),
                 ("search 'backup door', page 2", "/rows?family=aura&q=backup+door&page=2"),
                 ("item page (20 models)", "/aura/item/it_00617"),
                 ("index", "/")]
        with serving(make_app(data)) as url, httpx.Client(timeout=60) as client:
            print(f"{'page':38s} {'median ms':>10s} {'max ms':>8s} {'KiB':>6s}")
            for name, path in pages:
                med, worst, size = timed(client, url + path, args.repeats)
                print(f"{name:38s} {med:10.1f} {worst:8.1f} {size / 1024:6.0f}")
        if args.export:
            from aura.web.viewer.export import export_site

            t = time.perf_counter()
            n = export_site(data, Path(tmp) / "site")
            size = sum(p.stat().st_size for p in (Path(tmp) / "site").rglob("*") if p.is_file())
            print(f"static export: {n} pages, {size / 2**20:.0f} MiB in {time.perf_counter() - t:.0f} s")
    print(f"python {platform.python_version()} on {platform.machine()}, {args.repeats} requests per page, "
          f"1 client, the machine shared with other jobs")


if __name__ == "__main__":
    main()
