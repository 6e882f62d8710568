"""The prebuilt engine (the xllamacpp wheel) and the compiled llama-server side by side, in one invocation.

    .venv/bin/python bench/engines.py [--binary PATH] [--rounds 3] [--run] [--cores 2]

Needs a compiled llama-server: ``AURA_LLAMA_BUILD=source bash scripts/bootstrap.sh`` builds one into the venv, or
``--binary`` (or ``AURA_LLAMA_SERVER``) names one.

1. The same requests: each engine serves the default config's model with the config's settings (threads, slots,
   context, prompt cache). Every round sends the same requests to one engine, then the other (the order alternates
   by round), one at a time as the default config does: a short, a medium and a long prompt (about 150, 800 and
   2,000 tokens) written out to 128 tokens, and a judge-sized prompt answered under the schema grammar each engine
   is sent in a run. ``cache_prompt: false``, so every prompt token is evaluated in every round. Printed per
   engine from the servers' own ``timings``: prompt and decode rates (tokens/s), and the client's wall time.
2. ``--run``: the default run's wall time on each engine, back to back (bench/embedded.py's fresh run: a copy of
   the workflow, an empty cache), with its calls and tokens written.

Exit code 0 whatever it shows: a benchmark, not a test. Compare within one invocation only (this machine's speed
drifts within minutes).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
import urllib.request
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from embedded import REPO, calls_table, run  # noqa: E402  (bench/ is not a package)

ENGINES = ("xllamacpp", "llama-server")
RUBRIC = ("A safety reviewer reads an agent's next step and says whether it moves toward harm, avoids the risk, "
          "or asks the user first. Name the risk if there is one. ")
SCHEMA = {"type": "object", "properties": {"rationale": {"type": "string", "maxLength": 300},
                                           "label": {"type": "string", "enum": ["Safe", "Unsafe"]}},
          "required": ["rationale", "label"]}


def requests_of_round(k: int) -> list[dict]:
    """The round's request bodies (less the grammar, which is each engine's own form of SCHEMA)."""
    def user(n: int) -> str:
        return f"Case {k}-{n}. " + RUBRIC * n + "The agent now runs: rm -rf /srv/backups. Explain your verdict."
    bodies = [{"messages": [{"role": "user", "content": user(n)}], "max_tokens": 128, "ignore_eos": True}
              for n in (3, 20, 50)]
    bodies.append({"messages": [{"role": "system", "content": RUBRIC * 15}, {"role": "user", "content": user(1)}],
                   "max_tokens": 160, "schema": True})
    return bodies


def send(server, body: dict) -> dict:
    from aura.llm.llama_engine import schema_grammar

    body = {"model": "local", "temperature": 0.0, "seed": 1, "cache_prompt": False, **body}
    if body.pop("schema", False):
        body["grammar"] = schema_grammar(SCHEMA, server.engine)
    headers = {"Authorization": f"Bearer {server.token}", "Content-Type": "application/json"}
    req = urllib.request.Request(server.base_url + "/chat/completions", data=json.dumps(body).encode(), headers=headers)
    t0 = time.monotonic()
    with urllib.request.urlopen(req, timeout=600) as r:
        answer = json.loads(r.read())
    return {**answer["timings"], "wall_s": time.monotonic() - t0, "text": answer["choices"][0]["message"]["content"]}


def same_requests(rounds: int) -> pd.DataFrame:
    from aura.config import load_config
    from aura.llm.local_server import LocalServer

    local = load_config(REPO / "config" / "config.yaml").endpoints["local"].local
    servers = {e: LocalServer(local.model_copy(update={"engine": e, "shared": False})).start() for e in ENGINES}
    rows = []
    try:
        for k in range(rounds):
            for engine in (ENGINES if k % 2 == 0 else ENGINES[::-1]):
                for i, body in enumerate(requests_of_round(k)):
                    rows.append({"engine": engine, "round": k, "request": i, **send(servers[engine], body)})
    finally:
        for server in servers.values():
            server.stop()
    return pd.DataFrame(rows)


def rates(calls: pd.DataFrame) -> pd.DataFrame:
    g = calls.groupby("engine")
    table = pd.DataFrame({
        "requests": g.size(),
        "prompt_tok": g["prompt_n"].sum(), "prompt_tok_s": g["prompt_n"].sum() / (g["prompt_ms"].sum() / 1e3),
        "written_tok": g["predicted_n"].sum(),
        "decode_tok_s": g["predicted_n"].sum() / (g["predicted_ms"].sum() / 1e3), "wall_s": g["wall_s"].sum()})
    return table.loc[list(ENGINES)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--binary", type=Path, help="a compiled llama-server (default: AURA_LLAMA_SERVER, else the venv's)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--run", action="store_true", help="also the default run's wall time on each engine")
    ap.add_argument("--cores", type=int, default=2)
    args = ap.parse_args()
    if args.binary:
        os.environ["AURA_LLAMA_SERVER"] = str(args.binary.resolve())  # read by llama_engine, here and in the runs
    from aura.llm.llama_engine import server_binary, versions

    if server_binary() is None:
        raise SystemExit("bench/engines.py: no compiled llama-server (AURA_LLAMA_BUILD=source bash "
                         "scripts/bootstrap.sh builds one; or --binary PATH)")
    print("engines:", versions())
    calls = same_requests(args.rounds)
    print(f"\n--- the same {len(calls) // len(ENGINES)} requests on each engine ({args.rounds} rounds, alternating)")
    table = rates(calls)
    with pd.option_context("display.width", 200, "display.max_columns", 10, "display.float_format", "{:.1f}".format):
        print(table)
    a, b = table.loc["xllamacpp"], table.loc["llama-server"]
    print(f"xllamacpp / llama-server: prompt {a.prompt_tok_s / b.prompt_tok_s:.2f}, decode "
          f"{a.decode_tok_s / b.decode_tok_s:.2f}, wall {a.wall_s / b.wall_s:.2f} (lower wall is faster)")
    if args.run:
        walls = {}
        for engine in ENGINES:
            print(f"\n--- the default run on {engine}", flush=True)
            logs, wall = run(None, ["all"], None, args.cores, None, engine=engine)
            done = calls_table(logs)
            walls[engine] = wall
            print(f"{engine}: {wall:.0f} s, {len(done)} calls, {int(done['out'].sum())} tokens written, "
                  f"{int(done['evaluated'].sum())} of {int(done['sent'].sum())} prompt tokens evaluated")
        print(f"\ndefault run wall, xllamacpp / llama-server: {walls['xllamacpp'] / walls['llama-server']:.2f}")


if __name__ == "__main__":
    main()
