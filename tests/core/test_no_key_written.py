"""No API key reaches a file or a log, whatever the server echoes (issue 32 §3).

A server whose errors quote the request's Authorization header (`echo_auth`: "Incorrect API key provided:
Bearer <the key>") answers a real Snakemake run and a stage job; afterwards every file under the run's folder
(outputs, call logs, job logs, summaries, cache, Snakemake's own log) and the processes' stderr hold the key 0
times, and the error lines name the key's variable instead.
"""
from __future__ import annotations

import os
import secrets
import subprocess
import sys
from pathlib import Path

import yaml

import scripted
from aura.io import read_jsonl, write_jsonl
from conftest import REPO, base_config, copy_workflow
from test_fail_loudly import dataset, rollout_args

VARIABLE = "AURA_TEST_CANARY_KEY"


def holding(root: Path, key: str) -> list[str]:
    """Every file under `root` whose bytes hold `key`."""
    return [str(p) for p in root.rglob("*") if p.is_file() and key.encode() in p.read_bytes()]


def env_with(key: str) -> dict:
    return {**os.environ, "PYTHONPATH": str(REPO / "src"), VARIABLE: key}


def test_a_401_that_echoes_the_key_leaves_it_in_no_file_of_a_snakemake_run(server, tmp_path):
    key = "sk-canary-" + secrets.token_hex(16)
    copy_workflow(tmp_path)
    raw = base_config(server.base_url, tmp_path / "cache", api_key_env=VARIABLE)
    raw["paths"]["seeds"] = str(scripted.write_seed_dir(tmp_path / "seeds"))
    raw["paths"]["logs"] = str(tmp_path / "logs")
    (tmp_path / "config" / "test.yaml").write_text(yaml.safe_dump(raw))
    server.set_rules([{"status": 401, "echo_auth": True}])
    out = subprocess.run([sys.executable, "-m", "snakemake", f"{raw['paths']['interim']}/tags.jsonl", "--cores", "1",
                          "--configfile", "config/test.yaml"], cwd=tmp_path, capture_output=True, text=True,
                         timeout=300, env=env_with(key))
    assert out.returncode != 0
    assert server.requests()[-1]["headers"]["authorization"] == f"Bearer {key}"  # the server did get (and echo) it
    (line,) = [x for x in out.stderr.splitlines() if x.startswith("aura summary:")]
    assert line.endswith(f"AuthenticationError: Incorrect API key provided: Bearer ${VARIABLE}")
    assert key not in out.stdout + out.stderr
    assert holding(tmp_path, key) == []
    assert holding(tmp_path, f"${VARIABLE}")  # the redacted error is there, in the job log and the summary


def test_an_item_level_error_that_echoes_the_key_leaves_it_out_of_the_rows_and_the_call_log(server, tmp_path):
    key = "sk-canary-" + secrets.token_hex(16)
    raw = base_config(server.base_url, tmp_path / "cache", api_key_env=VARIABLE, max_tries=1)
    raw["paths"]["logs"] = str(tmp_path / "logs")
    raw["llm"] = {"max_failed_items": 10}
    cfg = tmp_path / "config.yaml"
    cfg.write_text(yaml.safe_dump(raw))
    write_jsonl(tmp_path / "dataset.jsonl", dataset(3))
    # a 400 about the request's own size fails its item only: the rows carry the (echoed) error
    server.set_rules([{"status": 400, "code": "context_length_exceeded", "echo_auth": True,
                       "message": "maximum context length exceeded for key"}])
    out = subprocess.run([sys.executable, "-m", "aura", *rollout_args(cfg, tmp_path)], capture_output=True,
                         text=True, timeout=120, env=env_with(key))
    assert out.returncode == 0, out.stderr[-2000:]
    rows = list(read_jsonl(tmp_path / "rollouts.jsonl"))
    assert [r["status"] for r in rows] == ["failed"] * 3
    assert all(f"Bearer ${VARIABLE}" in r["error"] for r in rows)
    assert key not in out.stderr
    assert holding(tmp_path, key) == []
