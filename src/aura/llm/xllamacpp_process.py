"""The prebuilt engine's server process: llama.cpp's own server code, from the ``xllamacpp`` wheel, in this process.

    python -m aura.llm.xllamacpp_process --lease-dir DIR [--die-with-parent PID] --model GGUF --alias NAME
        --port PORT --api-key TOKEN --threads N --slots S --n-ctx C --cache-ram MIB

``xllamacpp.Server`` runs llama.cpp's HTTP server (the same routes as the ``llama-server`` binary: the
OpenAI-compatible chat endpoint with slots and continuous batching, the RAM prompt cache, grammars, ``timings``,
``/tokenize``, ``/apply-template``) on threads of this process. So nothing outlives the process: a SIGKILL takes
the server with it, and no child needs watching. Lifetime is the same as for the other engines
(`local_server`): the main thread watches the leases in DIR and exits once no holder lives;
``--die-with-parent`` ties a per-job server to its job (PR_SET_PDEATHSIG).

Each of the S slots gets a context of C tokens (the KV pool holds S x C), as on the binary.
"""
from __future__ import annotations

import argparse
import os
import signal
from pathlib import Path

from .local_server import die_with_parent, watch_leases


def params(args: argparse.Namespace):
    """xllamacpp's CommonParams for these arguments (the binary's command line, `llama_engine.binary_args`)."""
    import xllamacpp

    p = xllamacpp.CommonParams()
    p.model.path = str(args.model)
    p.model_alias = {args.alias}  # a set of names (a bare string would be read as its characters)
    p.hostnames = ["127.0.0.1"]
    p.port = args.port
    p.api_keys = [args.api_key]
    p.cpuparams.n_threads = args.threads
    p.cpuparams_batch.n_threads = args.threads
    p.n_parallel = args.slots
    p.n_ctx = args.slots * args.n_ctx  # split evenly between the slots: n_ctx each
    p.cache_ram_mib = args.cache_ram
    p.ui = False
    return p


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="xllamacpp_process")
    ap.add_argument("--lease-dir", required=True, type=Path)
    ap.add_argument("--die-with-parent", type=int)
    ap.add_argument("--model", required=True, type=Path)
    ap.add_argument("--alias", required=True)
    ap.add_argument("--port", required=True, type=int)
    ap.add_argument("--api-key", required=True)
    ap.add_argument("--threads", required=True, type=int)
    ap.add_argument("--slots", required=True, type=int)
    ap.add_argument("--n-ctx", required=True, type=int)
    ap.add_argument("--cache-ram", required=True, type=int)
    args = ap.parse_args(argv)
    if args.die_with_parent:
        die_with_parent(args.die_with_parent)
    for sig in (signal.SIGTERM, signal.SIGINT):  # the server's threads go with the process; nothing to flush
        signal.signal(sig, lambda signum, _frame: os._exit(128 + signum))
    import xllamacpp

    server = xllamacpp.Server(params(args))  # noqa: F841 (serves until the process exits)
    watch_leases(args.lease_dir)  # returns never: exits the process once no lease holder lives


if __name__ == "__main__":
    main()
