import os
import sys

if os.environ.get("AURA_JOB_SERVER", "off") != "off":  # a Snakemake job: run in a child of the run's job server
    from .pipeline.jobserver import run_via_server

    status = run_via_server(sys.argv[1:])
    if status is not None:
        raise SystemExit(status)

from .cli import main

raise SystemExit(main())
