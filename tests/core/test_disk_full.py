"""A full disk is one line naming the path, and no paid answer goes unaccounted (issue 32 §4).

The job runs in its own mount namespace (`unshare -rm`: no privileges needed) with a small tmpfs over the cache
folder or the results folder, against the fake server over real HTTP. A full results folder: one line naming the
output, no traceback, nothing half-written, every answer in the call log. A full cache folder: one line naming
the folder, nothing more sent, and every answer the server delivered is in the call log with its cost (paid,
not stored), so the rerun's repeat of those calls is never a cost that is nowhere.
"""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from aura.io import read_jsonl
from test_fail_loudly import ENV, ROLLOUT, job, rollout_args  # noqa: F401 - `job` is a fixture

N = 40


def _can_mount() -> bool:
    if not shutil.which("unshare"):
        return False
    probe = subprocess.run(["unshare", "-rm", "sh", "-c", "mount -t tmpfs -o size=4k none /mnt"], capture_output=True)
    return probe.returncode == 0


pytestmark = pytest.mark.skipif(not _can_mount(), reason="unshare -rm cannot mount a tmpfs here (user namespaces off)")


def on_small_disk(mountpoint: Path, size: str, *args: str) -> subprocess.CompletedProcess:
    """`python -m aura *args` with a tmpfs of `size` over `mountpoint`, seen by that process only."""
    mountpoint.mkdir(parents=True, exist_ok=True)
    script = 'mount -t tmpfs -o size="$1" none "$2" && shift 2 && exec "$@"'
    return subprocess.run(["unshare", "-rm", "sh", "-c", script, "sh", size, str(mountpoint), sys.executable, "-m",
                           "aura", *args], capture_output=True, text=True, timeout=300, env=ENV)


def paid(calls_log: Path) -> list[dict]:
    return [r for r in read_jsonl(calls_log) if not r["cache_hit"]]


def test_a_full_results_folder_is_one_line_and_the_call_log_keeps_every_answer(job, server, tmp_path):
    cfg = job(n_items=N)
    server.set_rules([{"content": ROLLOUT}])
    args = rollout_args(cfg, tmp_path)
    out_dir = tmp_path / "out"
    args[args.index(f"rollouts={tmp_path}/rollouts.jsonl")] = f"rollouts={out_dir}/rollouts.jsonl"
    run = on_small_disk(out_dir, "4k", *args)
    assert run.returncode == 1
    assert "Traceback" not in run.stderr
    errors = [x for x in run.stderr.splitlines() if x.startswith("error:")]
    assert errors == [f"error: rollout:m: cannot write {out_dir}/rollouts.jsonl: No space left on device (its file "
                      f"system is full); free space there and rerun"]
    assert len(paid(tmp_path / "logs" / "rollout.calls.jsonl")) == server.request_count() == N


def test_a_full_cache_folder_stops_the_job_and_every_delivered_answer_is_in_the_call_log(job, server, tmp_path):
    cfg = job(n_items=N, max_concurrency=4)
    server.set_rules([{"content": ROLLOUT, "delay": 0.05}])
    run = on_small_disk(tmp_path / "cache", "16k", *rollout_args(cfg, tmp_path))
    assert run.returncode == 1
    assert "Traceback" not in run.stderr
    errors = [x for x in run.stderr.splitlines() if x.startswith("error:")]
    assert errors == [f"error: rollout:m: the cache folder {tmp_path / 'cache'} cannot store answers: No space left "
                      f"on device (its file system is full); free space there and rerun"]
    assert not (tmp_path / "rollouts.jsonl").exists()
    delivered = server.request_count()
    records = paid(tmp_path / "logs" / "rollout.calls.jsonl")
    not_stored = [r for r in records if r["error"] == "paid, not stored: the cache folder is full"]
    assert len(records) == delivered < N  # every answer delivered is in the call log; the job stopped sending
    assert not_stored and all(r["cost_usd"] > 0 for r in records)
    assert len(not_stored) <= 4  # at most the calls in flight when the cache filled up
