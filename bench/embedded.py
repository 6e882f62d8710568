"""Where the embedded model's time goes, per stage of a run: server starts, calls, prompt tokens sent
vs evaluated (the rest was reused from llama.cpp's KV prefix / prompt cache), output tokens, model
wall, and the prompt/decode rates the same server measured in the same run.

Reads a run's logs: each job's call log (``<logs>/<rule>/...calls.jsonl``: tokens_in, tokens_cached,
tokens_out, latency_s and the server's ``timings``) and its stderr log (the ``[local server]`` line:
started or reused, and in how long). Two ways to get a run:

    .venv/bin/python bench/embedded.py --logs logs            # a run already made here
    .venv/bin/python bench/embedded.py --run [--seeds 3] [--threads 1] [--targets all] [--keep DIR]

``--run`` copies the workflow (with ``src/``) to a fresh folder, runs Snakemake there on the default
config with an empty cache (``--seeds`` caps aura.construct.max_seeds to keep it short) and reads its
logs. Prints one table and the ratios; the target (issue 9) is evaluated/sent <= 0.40 across the
run. Exit code 0 whatever it shows: a benchmark, not a test.

Then, on the same machine in the same invocation, llama.cpp's own ``llama-bench`` (built beside the engine's
llama-server) measures the model file at the config's thread count after 0, 1024, 2048 and 3072 tokens already in
the context (``-d``: a token's attention cost grows with the tokens before it, and the run's prompts are a few
hundred to 3000 tokens long); with ``--run``, before the run as well (this machine's speed drifts within minutes).
Each call's work is priced at llama-bench's rates at that call's own depth, and three
shares are printed, llama-bench's time for the work over the run's: prompt (tokens evaluated, the server's prompt
time), decode (tokens written, the server's decode time per request) and the engine share (all the calls' work over
the wall time in which at least one call was open). 1.0 means the run's engine did its work at the speed of
llama.cpp's own benchmark. ``--no-llama-bench`` skips it.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

REPO = Path(__file__).resolve().parents[1]
# + every family's demo data
COPY = ["Snakefile", "profiles", "rules", "config", "prompts", "notebooks", "report", "src"]
TARGET = 0.40
SERVER_LINE = re.compile(r"\[local server\] (?P<how>started|reused) .* in (?P<s>[\d.]+)s")


def calls_table(logs: Path) -> pd.DataFrame:
    rows = []
    for path in sorted(logs.rglob("*.calls.jsonl")):
        stage = path.relative_to(logs).parts[0]
        for line in path.read_text().splitlines():
            rec = json.loads(line)
            if rec.get("cache_hit"):
                continue
            t = rec.get("timings") or {}
            cached = rec.get("tokens_cached")
            # a call was open from `latency_s` before its answer came; logs older than `answered_at` have only
            # the time it was asked for, which a queued call left before it was sent (then an approximation)
            ended = rec.get("answered_at") or rec.get("started_at", 0.0) + rec["latency_s"]
            rows.append({"stage": stage, "sent": rec["tokens_in"], "ended_at": ended,
                         "evaluated": rec["tokens_in"] - cached if cached is not None else rec["tokens_in"],
                         "reported": cached is not None, "out": rec["tokens_out"], "wall_s": rec["latency_s"],
                         "prompt_n": t.get("prompt_n", 0), "prompt_ms": t.get("prompt_ms", 0.0),
                         "predicted_n": t.get("predicted_n", 0), "predicted_ms": t.get("predicted_ms", 0.0),
                         "total_ms": t.get("total_ms", 0.0)})
    return pd.DataFrame(rows, columns=["stage", "sent", "ended_at", "evaluated", "reported", "out", "wall_s",
                                       "prompt_n", "prompt_ms", "predicted_n", "predicted_ms", "total_ms"])


def busy_wall_s(calls: pd.DataFrame) -> float:
    """Seconds in which at least one model call was open (each spans [ended_at - latency, ended_at])."""
    spans = sorted(zip(calls["ended_at"] - calls["wall_s"], calls["ended_at"]))
    total, start, end = 0.0, None, None
    for a, b in spans:
        if end is None or a > end:
            total += 0.0 if end is None else end - start
            start, end = a, b
        else:
            end = max(end, b)
    return total + (end - start if end is not None else 0.0)


DEPTHS = (0, 1024, 2048, 3072)  # llama-bench -d: tokens already in the context before it measures


def llama_bench(model: Path, threads: int) -> pd.DataFrame | None:
    """llama-bench's pp512 and tg128 rates (tokens/s, mean of 3) for the model at `threads`, after each of DEPTHS
    tokens already in the context (`-d`): a 135M model spends much of a token's time on attention once ~1000 tokens
    precede it, so each of the run's calls is compared with the rates at its own depth. Rows: test ("pp" | "tg"),
    depth, rate, and `at`, the mean position of the test's tokens (depth + 256 for pp512, + 64 for tg128).
    None without llama-bench."""
    from aura.llm.llama_engine import install_dir, server_binary

    # beside the compiled llama-server (the build's, or the one AURA_LLAMA_SERVER names); the wheel has none
    binary = (server_binary() or install_dir() / "bin" / "llama-server").with_name("llama-bench")
    if not binary.is_file():
        print(f"llama-bench: not built ({binary}); no reference rates")
        return None
    out = subprocess.run([str(binary), "-m", str(model), "-t", str(threads), "-p", "512", "-n", "128",
                          "-d", ",".join(map(str, DEPTHS)), "-r", "3", "-o", "json"], capture_output=True, text=True)
    if out.returncode != 0:
        print(f"llama-bench failed ({out.returncode}): {out.stderr[-500:]}")
        return None
    rows = []
    for t in json.loads(out.stdout):
        test, depth = ("pp" if t["n_gen"] == 0 else "tg"), int(t.get("n_depth", 0))
        rows.append({"test": test, "depth": depth, "rate": float(t["avg_ts"]),
                     "at": depth + (t["n_prompt"] if test == "pp" else t["n_gen"]) / 2})
    return pd.DataFrame(rows)


def seconds_per_token(ref: pd.DataFrame, test: str, at: pd.Series) -> np.ndarray:
    """llama-bench's time for one token of `test` at context position `at`, linear between the measured positions
    (a token's attention work grows linearly with the tokens before it), flat beyond them."""
    points = ref[ref["test"] == test].sort_values("at")
    return np.interp(at.to_numpy(dtype=float), points["at"].to_numpy(), 1.0 / points["rate"].to_numpy())


def bench_seconds(ref: pd.DataFrame, sent: pd.Series, evaluated: pd.Series, written: pd.Series) -> tuple[float, float]:
    """llama-bench's time for calls' work, each call at its own depth: its `evaluated` prompt tokens at the mean
    position they were evaluated at (after the reused prefix of its `sent` tokens), its `written` tokens at the mean
    position they were written at. Returns (prompt seconds, decode seconds)."""
    prompt = (evaluated * seconds_per_token(ref, "pp", sent - evaluated / 2)).sum()
    decode = (written * seconds_per_token(ref, "tg", sent + written / 2)).sum()
    return float(prompt), float(decode)


def engine_shares(calls: pd.DataFrame, ref: pd.DataFrame, threads: int, snakemake_s: float | None) -> None:
    """The run's engine against llama-bench on the same machine (`bench_seconds`). Shares: llama-bench's time for
    the work over the run's time for it (1.0: llama.cpp's benchmark speed)."""
    timed = calls[(calls["prompt_ms"] > 0) | (calls["predicted_ms"] > 0)]
    p_need, d_need = bench_seconds(ref, timed["sent"], timed["prompt_n"], timed["predicted_n"])
    p_took, d_took = timed["prompt_ms"].sum() / 1e3, timed["predicted_ms"].sum() / 1e3
    rates = "; ".join(f"{t} " + ", ".join(f"{r.rate:.1f} @ d{r.depth}" for r in g.itertuples())
                      for t, g in ref.groupby("test", sort=False))
    print(f"llama-bench (-t {threads}, tok/s): {rates}")
    print(f"the run's prompt evaluation: {p_took:.0f} s for {int(timed['prompt_n'].sum())} tokens; llama-bench at "
          f"the same depths {p_need:.0f} s: prompt share {p_need / p_took:.2f}")
    print(f"the run's decoding: {d_took:.0f} s for {int(timed['predicted_n'].sum())} tokens (per request, the "
          f"server's own timings); llama-bench at the same depths {d_need:.0f} s: decode share {d_need / d_took:.2f}")
    # all the calls' work (the client's token counts), against the time in which a call was open
    busy = busy_wall_s(calls)
    need = sum(bench_seconds(ref, calls["sent"], calls["evaluated"], calls["out"]))
    print(f"the calls' work (tokens evaluated, tokens written) at llama-bench's rates: {need:.0f} s; the run had a "
          f"call open for {busy:.0f} s: engine share {need / busy:.2f}"
          + (f"; that work is {need / snakemake_s:.2f} of the run's {snakemake_s:.0f} s wall" if snakemake_s else ""))


def starts_table(logs: Path) -> pd.DataFrame:
    rows = []
    for path in sorted(logs.rglob("*.log")):
        for m in SERVER_LINE.finditer(path.read_text(errors="replace")):
            rows.append({"stage": path.relative_to(logs).parts[0], "how": m["how"], "start_s": float(m["s"])})
    return pd.DataFrame(rows, columns=["stage", "how", "start_s"])


def summary(calls: pd.DataFrame, starts: pd.DataFrame) -> pd.DataFrame:
    per = calls.groupby("stage").agg(calls=("sent", "size"), sent=("sent", "sum"), evaluated=("evaluated", "sum"),
                                     out=("out", "sum"), model_wall_s=("wall_s", "sum"), prompt_ms=("prompt_ms", "sum"),
                                     decode_ms=("predicted_ms", "sum"), server_ms=("total_ms", "sum"))
    st = starts.groupby("stage").agg(starts=("how", lambda h: int((h == "started").sum())),
                                     reuses=("how", lambda h: int((h == "reused").sum())), start_s=("start_s", "sum"))
    table = per.join(st, how="outer").fillna(0)
    table.loc["TOTAL"] = table.sum(numeric_only=True)
    table["eval_share"] = table["evaluated"] / table["sent"].where(table["sent"] > 0)
    # sampling, grammar, cache copies: the Python engine reports the whole request's time; llama-server does not
    table["other_ms"] = (table["server_ms"] - table["prompt_ms"] - table["decode_ms"]).where(table["server_ms"] > 0, 0.0)
    cols = ["starts", "reuses", "start_s", "calls", "sent", "evaluated", "eval_share", "out", "model_wall_s",
            "prompt_ms", "decode_ms", "other_ms"]
    return table[cols]


def local_engine(threads: int | None) -> tuple[Path, int]:
    """The default config's model file and llama.cpp thread count (`threads` where given), as the run's server
    had them."""
    from aura.config import load_config
    from aura.llm.local_server import model_path

    local = load_config(REPO / "config" / "config.yaml").endpoints["local"].local
    return model_path(local), threads or local.n_threads


def report(logs: Path, snakemake_s: float | None = None, reference: bool = True, threads: int | None = None,
           before: pd.DataFrame | None = None) -> None:
    calls, starts = calls_table(logs), starts_table(logs)
    if calls.empty:
        print(f"no model calls logged under {logs} (all cache hits, or not a run's logs)")
        return
    table = summary(calls, starts)
    with pd.option_context("display.width", 200, "display.max_columns", 20, "display.float_format", "{:.2f}".format):
        print(table.astype({c: "int64" for c in ("starts", "reuses", "calls", "sent", "evaluated", "out")}))
    tot = table.loc["TOTAL"]
    p_rate = calls["prompt_n"].sum() / (calls["prompt_ms"].sum() / 1e3) if calls["prompt_ms"].sum() else float("nan")
    d_rate = calls["predicted_n"].sum() / (calls["predicted_ms"].sum() / 1e3) if calls["predicted_ms"].sum() else float("nan")
    share = tot["evaluated"] / tot["sent"]
    print(f"\nprompt tokens evaluated / sent: {int(tot['evaluated'])} / {int(tot['sent'])} = {share:.3f} "
          f"(target <= {TARGET}: {'PASS' if share <= TARGET else 'FAIL'}); "
          f"{int(calls['reported'].sum())}/{len(calls)} calls reported their cached tokens")
    print(f"rates on this server in this run: prompt {p_rate:.1f} tok/s, decode {d_rate:.1f} tok/s; "
          f"sampling+other {tot['other_ms'] / max(tot['out'], 1):.1f} ms per output token")
    if p_rate == p_rate and d_rate == d_rate:
        cold = tot["sent"] / p_rate + tot["out"] / d_rate
        warm = tot["evaluated"] / p_rate + tot["out"] / d_rate
        print(f"model time at these rates: {cold:.0f}s if every prompt token were evaluated, {warm:.0f}s as evaluated "
              f"(+{tot['other_ms'] / 1e3:.0f}s sampling/other); measured model wall {tot['model_wall_s']:.0f}s")
    print(f"server starts: {int(tot['starts'])} started, {int(tot['reuses'])} reused by later jobs, "
          f"{tot['start_s']:.1f}s spent getting a server"
          + (f"; Snakemake wall {snakemake_s:.0f}s" if snakemake_s else ""))
    if reference and calls["predicted_ms"].sum() and calls["prompt_ms"].sum():
        model, threads = local_engine(threads)
        after = llama_bench(model, threads)
        # this machine's speed drifts by 10-30% within minutes: with a reference from before the run as well, the
        # shares are given against each and against their mean
        refs = {"after the run": after, "before the run": before}
        if after is not None and before is not None:
            refs["the mean of both"] = after.assign(rate=2 / (1 / after["rate"] + 1 / before["rate"].to_numpy()))
        for when, ref in refs.items():
            if ref is not None:
                print(f"\n--- against llama-bench {when}")
                engine_shares(calls, ref, threads, snakemake_s)


def run(seeds: int | None, targets: list[str], keep: Path | None, cores: int, threads: int | None,
        engine: str | None = None) -> tuple[Path, float]:
    """A fresh run of the default workflow in a copied folder (empty cache): its logs folder and wall seconds.
    `threads` and `engine` replace the copied config's local.n_threads and local.engine."""
    from aura.families import all_families

    work = keep or Path(tempfile.mkdtemp(prefix="aura-bench-"))
    demo = [str(Path(d).relative_to(REPO)) for f in all_families() for d in f.demo_data if Path(d).is_relative_to(REPO)]
    for item in [*COPY, *demo]:
        src, dst = REPO / item, work / item
        dst.parent.mkdir(parents=True, exist_ok=True)
        (shutil.copytree if src.is_dir() else shutil.copy2)(src, dst, **({"dirs_exist_ok": True} if src.is_dir() else {}))
    # the copied default config's llama.cpp threads (1 is far faster on a busy 2-core machine) and engine
    changes = {key: value for key, value in (("n_threads", threads), ("engine", engine)) if value}
    if changes:
        cfg_path = work / "config" / "config.yaml"
        raw = yaml.safe_load(cfg_path.read_text())
        raw["endpoints"]["local"]["local"].update(changes)
        cfg_path.write_text(yaml.safe_dump(raw, sort_keys=False))
    cmd = [sys.executable, "-m", "snakemake", "--cores", str(cores), *targets]
    if seeds:
        # the default case-study seed may not be among the seeds kept
        cmd += ["--config", f"aura={{construct: {{max_seeds: {seeds}, max_dimensions_per_prefix: 1}}, "
                            "stats: {case_study_seed: null}}"]
    print("running:", " ".join(cmd), "in", work, flush=True)
    t0 = time.monotonic()
    out = subprocess.run(cmd, cwd=work, env={**os.environ, "PYTHONPATH": str(work / "src")},
                         capture_output=True, text=True)
    wall = time.monotonic() - t0
    (work / "snakemake.out").write_text(out.stdout + out.stderr)
    print(f"snakemake exited {out.returncode} after {wall:.0f}s (output in {work / 'snakemake.out'})")
    return work / "logs", wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--logs", type=Path, help="a finished run's logs folder")
    ap.add_argument("--run", action="store_true", help="make a fresh run of the default workflow first")
    ap.add_argument("--seeds", type=int, help="cap aura.construct.max_seeds in the fresh run")
    ap.add_argument("--targets", nargs="*", default=["all"])
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--threads", type=int, help="llama.cpp n_threads in the fresh run's config")
    ap.add_argument("--keep", type=Path, help="run in this folder and keep it")
    ap.add_argument("--wall", type=float, help="with --logs: the run's Snakemake wall time, seconds")
    ap.add_argument("--no-llama-bench", action="store_true", help="skip the llama-bench reference rates")
    args = ap.parse_args()
    if args.run:
        before = None if args.no_llama_bench else llama_bench(*local_engine(args.threads))
        logs, wall = run(args.seeds, args.targets, args.keep, args.cores, args.threads)
        report(logs, wall, not args.no_llama_bench, args.threads, before)
    else:
        report(args.logs or REPO / "logs", args.wall, reference=not args.no_llama_bench)


if __name__ == "__main__":
    main()
