"""Snakemake's job rate limit without its idle tail.

With a job rate limit (`max-jobs-per-timespan`, the workflow profile's 1000/10s), Snakemake's scheduler arms a
`threading.Timer(timespan)` after each pass to look again when the span has passed. The timers are ordinary
threads, and Python waits for every such thread before a process exits: a run stayed alive, idle, for up to a
whole span after its last job (a one-figure rebuild took 12 s, of which 8 s idle). `daemon_rate_timers()` makes
those timers daemon threads: they wake the scheduler as before while it runs, and no longer hold the process
once it is done. The long span stays, since it saves CPU during long runs (fewer passes of the scheduler beside
the model server's threads on a small machine). It patches one private method of Snakemake's scheduler
(`JobScheduler._schedule_reevalutation`, so spelt), checked to exist at the pinned version by
tests/core/test_rate_timers.py; a Snakemake without it is left as it is.
"""
from __future__ import annotations

import threading


def daemon_rate_timers() -> bool:
    """Patch Snakemake's scheduler so its re-evaluation timers are daemon threads; False when it has no such hook."""
    try:
        from snakemake.scheduling.job_scheduler import JobScheduler
    except ImportError:
        return False
    if not hasattr(JobScheduler, "_schedule_reevalutation"):
        return False

    def _schedule_reevalutation(self, delay) -> None:
        timer = threading.Timer(delay, lambda: self._open_jobs.release())
        timer.daemon = True  # wakes the scheduler while it runs; never keeps a finished run alive
        timer.start()

    JobScheduler._schedule_reevalutation = _schedule_reevalutation
    return True
