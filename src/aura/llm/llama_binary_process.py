"""The lease keeper around llama.cpp's llama-server binary: it lives as long as the server may.

    python -m aura.llm.llama_binary_process --lease-dir DIR [--die-with-parent PID] -- <llama-server command>

The binary knows nothing of leases, so this small process runs it as its child and

* exits, taking the server with it, once no lease in DIR has a live holder (the same watchdog as the Python
  engine's process, `local_server.watch_leases`);
* starts the child with PR_SET_PDEATHSIG (Linux), so a SIGKILL of this process kills the server too;
* with ``--die-with-parent``, dies with the job that started it (per-job servers), as the Python engine does;
* forwards SIGTERM / SIGINT to the server and exits with its exit code.

The child stays in this process's process group, so `local_server.terminate` (a signal to the group) reaches
both.
"""
from __future__ import annotations

import argparse
import os
import signal
import subprocess
import threading
from pathlib import Path

from .local_server import die_with_my_parent, die_with_parent, watch_leases


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="llama_binary_process")
    ap.add_argument("--lease-dir", required=True, type=Path)
    ap.add_argument("--die-with-parent", type=int)
    ap.add_argument("command", nargs=argparse.REMAINDER)
    args = ap.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        ap.error("no llama-server command after --")
    if args.die_with_parent:
        die_with_parent(args.die_with_parent)
    child = subprocess.Popen(command, stdin=subprocess.DEVNULL, preexec_fn=die_with_my_parent)  # runs in the child before exec

    def forward(signum, _frame):
        child.send_signal(signum)

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, forward)
    threading.Thread(target=watch_leases, args=(args.lease_dir,), daemon=True, name="leases").start()
    rc = child.wait()
    os._exit(rc if rc >= 0 else 128 - rc)  # killed by a signal: 128 + its number, as a shell says


if __name__ == "__main__":
    main()
