"""Render one report notebook with papermill, retrying a kernel that dies while starting.

`python -m aura render NOTEBOOK EXECUTED -p name value ...` is what every `render_<name>` rule runs.

Why not `python -m papermill` directly: jupyter_client picks the kernel's five TCP ports by
binding to port 0 and releasing the socket, and only then starts the kernel. Two notebooks that
start at the same moment (`snakemake --cores N`) can therefore be handed the same port; the
second kernel dies with "Address already in use" before it answers `kernel_info`, and papermill
raises RuntimeError("Kernel died before replying to kernel_info"). No cell has run at that point,
so starting the notebook again is safe: a new kernel draws new ports.
"""
from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path

# What nbclient/jupyter_client raise when the kernel never became ready. A failing cell raises
# papermill's PapermillExecutionError instead, which is never retried.
_STARTUP_MESSAGES = ("Kernel died before replying to kernel_info", "Kernel didn't respond in")


def is_kernel_startup_failure(exc: BaseException) -> bool:
    return isinstance(exc, (RuntimeError, TimeoutError)) and any(m in str(exc) for m in _STARTUP_MESSAGES)


def render(notebook: Path, executed: Path, parameters: dict[str, str], *, attempts: int = 3,
           execute: Callable[..., object] | None = None, wait_s: float = 1.0) -> int:
    """Execute `notebook` into `executed` with `parameters`; return the attempt that succeeded.

    `execute` defaults to `papermill.execute_notebook`; a kernel-startup failure is retried up
    to `attempts` times in all, any other error propagates at once.
    """
    if execute is None:
        import papermill

        execute = papermill.execute_notebook
    for attempt in range(1, attempts + 1):
        try:
            execute(str(notebook), str(executed), parameters=parameters, progress_bar=False)
            return attempt
        except Exception as exc:  # noqa: BLE001 - filtered right below
            if not is_kernel_startup_failure(exc) or attempt == attempts:
                raise
            print(f"render {notebook}: kernel failed to start (attempt {attempt}/{attempts}: {exc}); "
                  f"starting a new kernel", file=sys.stderr, flush=True)
            time.sleep(wait_s * attempt)
    raise AssertionError("unreachable")


def parse_parameters(pairs: list[list[str]] | None) -> dict[str, str]:
    """`-p name value` pairs as raw strings (paths stay paths; papermill's CLI would guess types)."""
    out: dict[str, str] = {}
    for name, value in pairs or []:
        if name in out:
            raise SystemExit(f"render: parameter {name!r} given twice")
        out[name] = value
    return out
