"""Throughput of the LLM layer against the fake OpenAI server, next to a bare AsyncOpenAI loop.

One run measures, against the same fake server (``aura.simulator.server``, child process, fixed
latency per call):

* bare:  ``openai.AsyncOpenAI`` (default HTTP client, ``max_retries=0``) + ``asyncio.Semaphore``,
  ``gather`` over all calls;
* layer: ``aura.llm.client.LLMClient.run`` with cache and accounting on, cold cache (a fresh
  temporary cache dir for every measured run);
* layer warm: the same requests again on the last filled cache (must make no HTTP request).

After a short bare warm-up, bare and layer runs alternate (bare, layer, bare, layer, ... for
``--repeats`` rounds); the report shows the best run of each (highest calls/s) and lists all runs.
Ratios: to the ideal ``concurrency / latency`` and layer / bare. The target is layer/bare >= 0.80.
The exit code is 0 whether the target is met or not: this is a benchmark, not a test.

    .venv/bin/python bench/llm_throughput.py [--calls 2000] [--concurrency 64] [--latency 0.05]
                                             [--chars 1500] [--repeats 2]
"""
from __future__ import annotations

import argparse
import asyncio
import io
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "src"))

import openai  # noqa: E402

from aura.simulator.server import FakeOpenAIServer  # noqa: E402

from aura.config import validate_config  # noqa: E402
from aura.llm.accounting import Accounting  # noqa: E402
from aura.llm.cache import Cache  # noqa: E402
from aura.llm.client import LLMClient, LLMRequest  # noqa: E402

TARGET = 0.80
FILLER = ("The agent was asked to tidy the home directory and began deleting files it had not listed. "
          "Assess whether the trajectory is safe, and explain the risk in plain words. ")


def text_of(prefix: str, chars: int) -> str:
    """A ``chars``-long string that starts with ``prefix`` (so every call is unique)."""
    body = prefix + " " + FILLER * (chars // len(FILLER) + 2)
    return body[:chars]


def messages_for(tag: str, i: int, chars: int) -> list[dict]:
    return [{"role": "user", "content": text_of(f"[{tag} #{i}]", chars)}]


# bare loop --------------------------------------------------------------------------------
async def _bare(base_url: str, tag: str, calls: int, concurrency: int, chars: int) -> int:
    client = openai.AsyncOpenAI(base_url=base_url, api_key="bench", max_retries=0)
    sem = asyncio.Semaphore(concurrency)
    all_msgs = [messages_for(tag, i, chars) for i in range(calls)]

    async def one(msgs: list[dict]) -> str | None:
        async with sem:
            resp = await client.chat.completions.create(model="fake-model", messages=msgs,
                                                        temperature=0, max_tokens=400)
        return resp.choices[0].message.content

    try:
        out = await asyncio.gather(*(one(m) for m in all_msgs))
    finally:
        await client.close()
    return sum(1 for t in out if t)


def run_bare(base_url: str, tag: str, calls: int, concurrency: int, chars: int) -> float:
    t0 = time.perf_counter()
    ok = asyncio.run(_bare(base_url, tag, calls, concurrency, chars))
    wall = time.perf_counter() - t0
    if ok != calls:
        raise SystemExit(f"bare loop: {ok}/{calls} answers")
    return calls / wall


# the layer --------------------------------------------------------------------------------
def make_config(base_url: str, concurrency: int, cache_dir: str):
    m = "m"
    return validate_config({
        "paths": {"cache": cache_dir},
        "endpoints": {"fake": {"kind": "openai", "base_url": base_url, "api_key_env": None,
                               "structured_output": "none", "max_concurrency": concurrency}},
        # the AURA family's panel roles need three distinct models (its schema); the benchmark calls only m
        "models": {name: {"endpoint": "fake", "model_id": "fake-model",
                          "params": {"temperature": 0, "max_tokens": 400}} for name in (m, "j2", "j3")},
        "aura": {"roles": {"generator": m, "classifier": m, "reviewers": [m, "j2", "j3"],
                           "judges": [m, "j2", "j3"], "evaluated": [m]}},
    }, source="<bench>")


def make_requests(calls: int, chars: int) -> list[LLMRequest]:
    return [LLMRequest(item_id=f"item-{i}", messages=messages_for("layer", i, chars), prompt_name="bench",
                       prompt_sha256="0" * 64) for i in range(calls)]


def cache_entries(cache_dir: str) -> int:
    return sum(1 for p in Path(cache_dir).rglob("*.json") if not p.name.startswith("."))


def run_layer(base_url: str, requests: list[LLMRequest], concurrency: int, cache_dir: str,
              expect_hits: bool) -> tuple[float, Accounting]:
    config = make_config(base_url, concurrency, cache_dir)
    acc = Accounting(label="bench", stream=io.StringIO())  # not a tty: no tqdm bar
    with LLMClient(config, Cache(cache_dir), acc) as client:
        t0 = time.perf_counter()
        results = client.run("bench", "m", requests)
        wall = time.perf_counter() - t0
    n = len(requests)
    bad = [r for r in results if r.status != "ok"]
    if bad:
        raise SystemExit(f"layer: {len(bad)}/{n} results not ok, first: {bad[0].status} {bad[0].error}")
    want_calls, want_hits = (0, n) if expect_hits else (n, 0)
    if (acc.calls, acc.cache_hits) != (want_calls, want_hits):
        raise SystemExit(f"layer: accounting shows calls={acc.calls} cache_hits={acc.cache_hits}, "
                         f"expected calls={want_calls} cache_hits={want_hits}")
    if cache_entries(cache_dir) != n:
        raise SystemExit(f"layer: cache holds {cache_entries(cache_dir)} entries, expected {n}")
    return n / wall, acc


# main -------------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--latency", type=float, default=0.05, help="fake server delay per call, seconds")
    ap.add_argument("--chars", type=int, default=1500, help="characters of each user message and answer")
    ap.add_argument("--repeats", type=int, default=2, help="alternating bare/layer rounds")
    args = ap.parse_args(argv)

    ideal = args.concurrency / args.latency
    answer = text_of("[answer]", args.chars)
    tmp_root = Path(tempfile.mkdtemp(prefix="aura-bench-"))
    bare_runs: list[float] = []
    layer_runs: list[float] = []
    try:
        with FakeOpenAIServer(rules=[{"delay": args.latency, "content": answer}], mode="process") as srv:
            run_bare(srv.base_url, "warmup", min(100, args.calls), args.concurrency, args.chars)
            requests = make_requests(args.calls, args.chars)
            cache_dir = ""
            for r in range(args.repeats):
                bare_runs.append(run_bare(srv.base_url, f"bare{r}", args.calls, args.concurrency, args.chars))
                cache_dir = str(tmp_root / f"cache{r}")  # fresh dir: cold cache
                before = srv.stats()["count"]
                rate, _ = run_layer(srv.base_url, requests, args.concurrency, cache_dir, expect_hits=False)
                sent = srv.stats()["count"] - before
                if sent != args.calls:
                    raise SystemExit(f"layer (cold): server saw {sent} requests, expected {args.calls}")
                layer_runs.append(rate)
            before = srv.stats()["count"]
            warm, _ = run_layer(srv.base_url, requests, args.concurrency, cache_dir, expect_hits=True)
            warm_http = srv.stats()["count"] - before
    finally:
        shutil.rmtree(tmp_root, ignore_errors=True)

    bare, layer = max(bare_runs), max(layer_runs)
    ratio = layer / bare
    fmt = lambda xs: ", ".join(f"{x:.1f}" for x in xs)  # noqa: E731
    print(f"calls={args.calls} concurrency={args.concurrency} latency={args.latency * 1000:g}ms "
          f"msg_chars={args.chars} repeats={args.repeats} (best run of each shown)")
    print(f"ideal             {ideal:7.1f} calls/s")
    print(f"bare AsyncOpenAI  {bare:7.1f} calls/s  (ratio to ideal {bare / ideal:.2f})  runs: {fmt(bare_runs)}")
    print(f"aura layer        {layer:7.1f} calls/s  (ratio to ideal {layer / ideal:.2f}, ratio to bare "
          f"{ratio:.2f})  [cache+accounting on, cold cache]  runs: {fmt(layer_runs)}")
    print(f"aura layer warm   {warm:7.1f} calls/s  ({warm_http} HTTP requests)")
    verdict = "PASS" if ratio >= TARGET else "FAIL"
    print(f"{verdict}: layer/bare = {ratio:.2f} {'>=' if ratio >= TARGET else '<'} {TARGET:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
