"""`python -m aura.serve_jobs FOLDER RUN_PID`: the process of a run's job server (aura.pipeline.jobserver starts
it). It hands the server the CLI's `main`, what each job runs, so the server's module imports nothing above it."""
from __future__ import annotations

import sys
from pathlib import Path

from .cli import build_parser, main
from .pipeline.jobserver import serve

if __name__ == "__main__":
    raise SystemExit(serve(Path(sys.argv[1]), int(sys.argv[2]), main, build_parser))
