"""The SLURM profile on a real one-node SLURM cluster (Debian's slurm-wlm + munge, started by
tests/slurm/cluster.sh): a small AURA config runs through `sbatch` with config/profiles/slurm and
Snakemake's SLURM executor plugin, then the same config runs locally, and the data outputs of the two
runs are equal byte for byte.

Skipped when slurm-wlm/munge are missing or the test is not root (slurmd must start as root), unless
AURA_REQUIRE_SLURM=1 (CI: .ci/run installs the packages and sets it).

Run-specific facts the comparison leaves out, and why:
- provenance sidecars (*.prov.json): the `run` field (aura.provenance.RUN_FIELD: time, host, cwd,
  pid of the writing process); every other field must be equal;
- logs/ (timings, call logs), the response caches (each run has its own; the local run calls the
  fake server again) and .snakemake/ are not outputs and are not compared;
- only when the code changed while the runs ran (another commit in a shared working tree; never in
  CI): the sidecars' `git` and `config_hash` and the data card's "Built by" line, which name it.
"""
from __future__ import annotations

import difflib
import hashlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import pytest
import yaml

import scripted
from aura.provenance import git_state, without_run
from conftest import REPO, base_config, copy_workflow

INSTALL = "apt-get install -y slurm-wlm munge"
REQUIRED = os.environ.get("AURA_REQUIRE_SLURM") == "1"
COMMANDS = ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "scontrol", "sinfo")
MISSING = [c for c in COMMANDS if shutil.which(c) is None]
CLUSTER = REPO / "tests" / "slurm" / "cluster.sh"
SLURM_CONF = Path("/etc/slurm/slurm.conf")
MARK = "# Written by tests/slurm/cluster.sh"


def _why_not() -> str | None:
    if MISSING:
        return f"SLURM test needs {', '.join(MISSING)}: {INSTALL}"
    if os.geteuid() != 0:
        return "SLURM test must run as root (slurmd starts jobs as their user)"
    if SLURM_CONF.exists() and not SLURM_CONF.read_text().startswith(MARK):
        return f"{SLURM_CONF} belongs to a real cluster: the test never overwrites it"
    return None


WHY_NOT = _why_not()
pytestmark = pytest.mark.skipif(WHY_NOT is not None and not REQUIRED, reason=WHY_NOT or "")

# The targets: every data output of the AURA family (the paper statistics need the whole construction
# and evaluation chain; reliability and construction_counts the rest) and two renders (a table and a
# figure) for the render group; the other renders are tested in test_workflow_run.py.
TARGETS = ["paper_stats", "reliability", "construction_counts", "render_table33_overall", "render_unsafe_rates"]
# Snakemake options for this toy cluster only (a site keeps the profile's): no slurmdbd here, so job
# states come from `squeue` (MinJobAge=600 in cluster.sh keeps finished jobs listed); first status check
# after 1 s, not 40, and then every second, not every 10 (the jobs here take seconds, and six of them run one after
# the other); the SLURM logs of successful jobs are kept so the test can read them.
TOY_CLUSTER = ["--slurm-status-command", "squeue", "--slurm-init-seconds-before-status-checks", "1",
               "--seconds-between-status-checks", "1", "--slurm-keep-successful-logs", "--latency-wait", "5"]


def _free_ports() -> int:
    """A port p with p and p + 1 free (slurmctld, slurmd)."""
    for _ in range(50):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        with socket.socket() as a, socket.socket() as b:
            try:
                a.bind(("127.0.0.1", port))
                b.bind(("127.0.0.1", port + 1))
                return port
            except OSError:
                continue
    raise RuntimeError("no two adjacent free ports")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    if WHY_NOT is not None:
        pytest.fail(f"AURA_REQUIRE_SLURM=1 but {WHY_NOT}", pytrace=False)
    folder = tmp_path_factory.mktemp("slurm")
    env = {**os.environ, "AURA_SLURM_DIR": str(folder), "AURA_SLURM_PORT": str(_free_ports())}
    started = subprocess.run(["bash", str(CLUSTER), "start"], env=env, capture_output=True, text=True, timeout=120)
    try:
        assert started.returncode == 0, started.stdout + started.stderr
        yield folder
    finally:
        subprocess.run(["bash", str(CLUSTER), "stop"], env=env, capture_output=True, text=True, timeout=120)


def _workdir(root: Path, fake_url: str) -> Path:
    """A copy of the workflow with the small config; every path relative to the workdir, so both
    runs write byte-equal provenance (their inputs are relative paths)."""
    copy_workflow(root)
    raw = base_config(fake_url, root / "cache")
    raw["paths"] = {name: name for name in ("cache", "interim", "processed", "results", "logs", "figures")}
    scripted.write_seed_dir(root / "seeds")
    raw["paths"]["seeds"] = "seeds"
    raw["families"] = ["aura"]
    # One job at a time may call the endpoint: the Snakefile's api_fake resource, which the SLURM
    # run must hold across its sbatch jobs as a local run does.
    raw["endpoints"]["fake"]["max_parallel_jobs"] = 1
    (root / "config" / "test.yaml").write_text(yaml.safe_dump(raw))
    return root


def _snakemake(workdir: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "snakemake", *TARGETS, "--configfile", "config/test.yaml", *args],
                            cwd=workdir, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, "PYTHONPATH": str(REPO / "src")})


def _finish(proc: subprocess.Popen, timeout: int) -> str:
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
        pytest.fail(f"snakemake ran past {timeout} s: {out[-3000:]}", pytrace=False)
    assert proc.returncode == 0, out[-4000:]
    return out


def _jobcomp(folder: Path) -> dict[str, dict]:
    """SLURM's own record of finished jobs (JobCompType=jobcomp/filetxt): job id -> fields."""
    jobs = {}
    for line in (folder / "log" / "jobcomp.txt").read_text().splitlines():
        fields = dict(part.split("=", 1) for part in line.split() if "=" in part)
        jobs[fields["JobId"]] = fields
    return jobs


def _code_fingerprint() -> str:
    """What sidecars' `git` and `config_hash` follow: the package's git state and the schema (defaults)."""
    return hashlib.sha256(json.dumps(git_state(), sort_keys=True).encode()
                          + (REPO / "config" / "schema.yaml").read_bytes()).hexdigest()


# the data card names the code version: `config hash `<12 hex>`, git `<12 hex>`[ dirty]`
BUILT_BY = re.compile(r"config hash `[0-9a-f]+`, git `[^`]*`( dirty)?")


def _outputs(workdir: Path) -> dict[str, Path]:
    return {str(p.relative_to(workdir)): p for folder in ("interim", "processed", "results", "figures")
            for p in sorted((workdir / folder).rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def runs(cluster, fake, tmp_path_factory):
    """The same config through SLURM and locally. Yields (slurm workdir, local workdir, Snakemake's
    log of the SLURM run, whether the code changed while they ran)."""
    fake.reset()
    fake.set_rules(scripted.rules())
    on_slurm = _workdir(tmp_path_factory.mktemp("on_slurm"), fake.base_url)
    local = _workdir(tmp_path_factory.mktemp("local"), fake.base_url)
    # side by side: two independent Snakemake runs (own workdir, cache and api_fake resource each)
    code_before = _code_fingerprint()
    local_run = _snakemake(local, "--cores", "2")
    slurm_run = _snakemake(on_slurm, "--profile", str(REPO / "config" / "profiles" / "slurm"), *TOY_CLUSTER)
    # 1200 s: on a 2-core machine busy with the other test workers the SLURM run took 361-477 s, and past 600 s once
    # with a default run beside the suite (its construction group alone 9 min)
    log = _finish(slurm_run, 1200)
    _finish(local_run, 1200)
    yield on_slurm, local, log, _code_fingerprint() != code_before
    fake.reset()


def test_jobs_ran_through_sbatch(runs, cluster):
    on_slurm, _, log, _ = runs
    # "Job <n> has been submitted with SLURM jobid <id> (log: .../slurm_logs/<rule_x|group_x...>/<id>.log)"
    submitted = {jobid: kind for jobid, kind in re.findall(
        r"submitted with SLURM jobid (\d+) \(log: \S*/slurm_logs/((?:rule|group)_[a-z]+)", log)}
    # Expected submissions, from the DAG of TARGETS (1 evaluated model m, 3 panel judges, 1 shard):
    #   group_construct: tag_truncate, relevance, generate_variations, review_variations x3, classify,
    #                    generate_pairs, review_pairs x3 (the profile's construct group: 1 job)
    #   rule_rollout: 1 (m, shard 0); rule_judge: 3 (m x judges m, jb, jc)
    #   group_render: render_table33_overall + render_unsafe_rates (group-components render=50: 1 job)
    # and nothing for the localrules (select_seeds, finalize, construction_counts, panel, model_rates,
    # paper_stats, reliability), which run in the main process.
    kinds = sorted(submitted.values())
    assert kinds == ["group_construct", "group_render", "rule_judge", "rule_judge", "rule_judge", "rule_rollout"], log[-3000:]
    # SLURM itself saw each of them run to completion on the node, named by this run's id.
    finished = _jobcomp(cluster)
    (run_id,) = re.findall(r"SLURM run ID: (\S+)", log)
    for jobid in submitted:
        assert finished[jobid]["JobState"] == "COMPLETED" and finished[jobid]["Name"] == run_id, finished[jobid]
    listed = subprocess.run(["squeue", "--states=all", "--noheader", "--format=%i|%T|%j"],
                            capture_output=True, text=True, check=True).stdout.split()
    assert {row for row in listed if row.endswith(run_id)} == {f"{j}|COMPLETED|{run_id}" for j in submitted}
    # the local rules' outputs exist although no SLURM job made them
    assert (on_slurm / "processed" / "dataset.jsonl").exists() and (on_slurm / "results" / "stats" / "model_rates.csv").exists()


def test_endpoint_resource_holds_across_sbatch_jobs(runs, cluster):
    """max_parallel_jobs: 1 -> api_fake=1: no two model-calling SLURM jobs ran at the same time, though
    the node has 2 CPUs and each asks for 1 (without the resource, the 3 judge jobs would overlap)."""
    _, _, log, _ = runs
    finished = _jobcomp(cluster)
    api_jobs = [jobid for jobid, kind in re.findall(
        r"submitted with SLURM jobid (\d+) \(log: \S*/slurm_logs/((?:rule|group)_[a-z]+)", log) if kind != "group_render"]
    spans = sorted((datetime.fromisoformat(finished[j]["StartTime"]), datetime.fromisoformat(finished[j]["EndTime"]))
                   for j in api_jobs)
    assert len(spans) == 5
    for (_, end), (start, _) in zip(spans, spans[1:]):
        assert start >= end, spans


def test_outputs_equal_a_local_run(runs):
    on_slurm, local, _, code_changed = runs
    a, b = _outputs(on_slurm), _outputs(local)
    assert sorted(a) == sorted(b)
    # the data outputs of TARGETS, at least: the released dataset, the rollouts, every judgment and table
    assert {"processed/dataset.jsonl", "results/rollouts/m/shard0.jsonl", "results/stats/table33_overall.csv",
            "results/tables/table33_overall.md", "figures/unsafe_rates.png"} <= set(a)
    differing = []
    for name in a:
        if name.endswith(".prov.json"):
            provs = [without_run(json.loads(x[name].read_text())) for x in (a, b)]
            if code_changed:
                provs = [{k: v for k, v in p.items() if k not in ("git", "config_hash")} for p in provs]
            same = provs[0] == provs[1]
        elif name == "processed/DATACARD.md" and code_changed:
            same = BUILT_BY.sub("", a[name].read_text()) == BUILT_BY.sub("", b[name].read_text())
        else:
            same = a[name].read_bytes() == b[name].read_bytes()
        if not same:
            differing.append(name)
    first = ""
    if differing and not differing[0].endswith((".png", ".pdf")):
        first = "".join(difflib.unified_diff(a[differing[0]].read_text().splitlines(True),
                                             b[differing[0]].read_text().splitlines(True), "slurm", "local", n=1))[:2000]
    assert differing == [], first
