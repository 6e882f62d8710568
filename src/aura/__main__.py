import os
import sys

from .quick_exit import skip_final_collections

skip_final_collections()  # a stage's or command's exit skips the heap's last collections (aura/quick_exit.py)
if os.environ.get("AURA_JOB_SERVER", "off") != "off":  # a Snakemake job: run in a child of the run's job server
    from .pipeline.jobserver import run_via_server

    status = run_via_server(sys.argv[1:])
    if status is not None:
        raise SystemExit(status)

from .cli import main

raise SystemExit(main())
