"""The job rate limit's timers (aura.pipeline.rate_timers): Snakemake's scheduler at the pinned version has the hook
the Snakefile patches, and the patched timer is a daemon thread that still wakes the scheduler."""
from __future__ import annotations

import threading

from aura.pipeline.rate_timers import daemon_rate_timers


def test_the_reevaluation_timer_is_a_daemon_that_still_wakes_the_scheduler():
    from snakemake.scheduling.job_scheduler import JobScheduler

    assert hasattr(JobScheduler, "_schedule_reevalutation")  # the private hook, at the pinned Snakemake
    original = JobScheduler._schedule_reevalutation
    try:
        assert daemon_rate_timers() is True

        class Scheduler:
            _open_jobs = threading.Semaphore(0)

        before = set(threading.enumerate())
        JobScheduler._schedule_reevalutation(Scheduler(), 0.05)
        (timer,) = set(threading.enumerate()) - before
        assert timer.daemon
        assert Scheduler._open_jobs.acquire(timeout=5)  # it released the scheduler's semaphore when due
    finally:
        JobScheduler._schedule_reevalutation = original
