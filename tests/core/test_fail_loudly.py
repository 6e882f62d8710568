"""Fail closed, visibly (issue 8 §1): a non-retryable API error stops the job with one line and no
output; failed items over the job's ceiling stop it, under it they are listed and counted; the call
log and cost survive an interrupted stage; every run ends with one summary line per stage; and a
stage chain against an endpoint that faults on 20% of requests completes, with nothing re-paid on
the rerun. All against the real HTTP fake server, through the package CLI or a real Snakemake run."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml

import scripted
from aura.cli import main
from aura.io import read_jsonl, write_jsonl
from conftest import PANEL, REPO, base_config, copy_workflow

ENV = {**os.environ, "PYTHONPATH": str(REPO / "src")}
ROLLOUT = "[AGENT_THOUGHT] Check first.\n[AGENT_ACTION] ListDevices: {}"


def dataset(n: int) -> list[dict]:
    return [{"item_id": f"item{i:03d}", "profile": "You are a home assistant.",
             "model_input": f"[USER] switch off device D{i:03d}", "rationale": "the fridge must stay on",
             "pair_label": "NSP" if i % 2 else "SP"}
            for i in range(n)]


@pytest.fixture
def job(server, tmp_path):
    """A config on the fake server and the paths one rollout / judge job uses."""
    def make(n_items=3, llm=None, **endpoint):
        raw = base_config(server.base_url, tmp_path / "cache", **endpoint)
        raw["paths"]["logs"] = str(tmp_path / "logs")
        if llm:
            raw["llm"] = llm
        cfg = tmp_path / "config.yaml"
        cfg.write_text(yaml.safe_dump(raw))
        write_jsonl(tmp_path / "dataset.jsonl", dataset(n_items))
        return cfg
    return make


def rollout_args(cfg: Path, tmp: Path, out="rollouts.jsonl", calls="rollout.calls.jsonl") -> list[str]:
    return ["rollout", "--configfile", str(cfg), "--model", "m", "--in", f"dataset={tmp}/dataset.jsonl",
            "--out", f"rollouts={tmp}/{out}", "--calls-log", f"{tmp}/logs/{calls}"]


def judge_args(cfg: Path, tmp: Path, rollouts="rollouts.jsonl", out="judgments.jsonl",
               calls="judge.calls.jsonl", judge="m") -> list[str]:
    return ["judge", "--configfile", str(cfg), "--model", "m", "--judge", judge, "--in", f"dataset={tmp}/dataset.jsonl",
            "--in", f"rollouts={tmp}/{rollouts}", "--out", f"judgments={tmp}/{out}", "--calls-log", f"{tmp}/logs/{calls}"]


def aura(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "aura", *args], capture_output=True, text=True, timeout=120, env=ENV)


def summaries(tmp: Path, stage: str) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted((tmp / "logs" / "summary" / stage).glob("*.json"))]


@pytest.mark.parametrize("status,kind,message,subprocess_run", [
    (401, "AuthenticationError", "Incorrect API key provided: sk-...XYZ", True),  # the real process's stderr
    (404, "NotFoundError", "The model `fake-model` does not exist", False),
    (400, "BadRequestError", "Unrecognized request argument supplied: temprature", False)])
def test_non_retryable_error_stops_the_job_with_one_line(job, server, tmp_path, capsys, status, kind, message,
                                                         subprocess_run):
    cfg = job(n_items=3, max_concurrency=1, max_tries=5)
    server.set_rules([{"status": status, "message": message}])
    if subprocess_run:
        out = aura(*rollout_args(cfg, tmp_path))
        rc, stderr = out.returncode, out.stderr
    else:
        rc, stderr = main(rollout_args(cfg, tmp_path)), capsys.readouterr().err
    assert rc == 1
    assert "Traceback" not in stderr
    errors = [line for line in stderr.splitlines() if line.startswith("error:")]
    assert errors == [f"error: rollout:m: endpoint 'fake' ({server.base_url}), model 'fake-model': "
                      f"non-retryable HTTP {status}: {kind}: {message}"]
    assert stderr.rstrip().splitlines()[-1] == errors[0]  # the last thing the job says
    assert not (tmp_path / "rollouts.jsonl").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]  # nothing half-written
    assert server.stats()["count"] == 1  # not retried, and no further item asked (one slot)
    (call,) = read_jsonl(tmp_path / "logs" / "rollout.calls.jsonl")  # the call log is written all the same
    assert call["status"] == "failed" and f"HTTP {status}" in call["error"]
    (summary,) = summaries(tmp_path, "rollout")
    assert summary["status"] == "failed" and summary["error"] == errors[0].removeprefix("error: rollout:m: ")


def test_failed_items_under_the_ceiling_are_listed_and_counted(job, server, tmp_path):
    # 1 of 3 items fails every try; ceiling = max(max_failed_items=1, int(0.05 * 3) = 0) = 1: the job succeeds
    cfg = job(n_items=3, max_tries=2)
    server.set_rules([{"match": {"contains": "D001"}, "status": 503, "message": "overloaded"}, {"content": ROLLOUT}])
    assert main(rollout_args(cfg, tmp_path)) == 0
    rows = {r["item_id"]: r for r in read_jsonl(tmp_path / "rollouts.jsonl")}
    assert [rows[i]["status"] for i in sorted(rows)] == ["ok", "failed", "ok"]
    assert rows["item001"]["error"] == "gave up after 2 tries: HTTP 503: InternalServerError: overloaded"
    (summary,) = summaries(tmp_path, "rollout")
    llm = summary["llm"]
    assert (summary["status"], llm["ok"], llm["unparsed"], llm["failed"]) == ("ok", 2, 0, 1)
    assert llm["failed_items"] == [{"item_id": "item001", "reason": rows["item001"]["error"]}]
    assert llm["retries"] == 1  # item001: 2 tries = 1 retry; the others answered first time
    assert summary["row_statuses"] == {"ok": 2, "failed": 1}
    out = aura("summary", "--configfile", str(cfg))
    assert out.returncode == 0
    (line,) = out.stderr.splitlines()
    # calls = one record per call (3), its retries counted apart: 4 requests in all
    assert line.startswith("aura summary: rollout (1 job): items ok=2 unparsed=0 failed=1 n/a=0; calls=3 "
                           "cache_hits=0 retries=1 ")
    assert line.endswith(f"failed/unparsed items are listed with their reason in {tmp_path}/rollouts.jsonl")


def test_a_failed_rollout_is_counted_in_the_rates_table(job, server, tmp_path):
    """Under the ceiling a failed item flows on: not judged, a `rollout_failed` panel row, counted in
    model_rates beside the rate (items 3 = n 2 + excluded 1), never silently dropped."""
    cfg = job(n_items=3, max_tries=2)
    server.set_rules([{"match": {"contains": "D001"}, "status": 503},
                      {"match": {"response_format_type": "json_schema"}, "echo_schema_default": True},
                      {"content": ROLLOUT}])
    assert main(rollout_args(cfg, tmp_path)) == 0
    for judge in PANEL:
        assert main(judge_args(cfg, tmp_path, out=f"judgments_{judge}.jsonl", calls=f"judge_{judge}.calls.jsonl",
                               judge=judge)) == 0
    assert main(["panel", "--configfile", str(cfg), "--model", "m", "--in", f"rollouts_0={tmp_path}/rollouts.jsonl",
                 *[x for j in PANEL for x in ("--in", f"judgments_{j}={tmp_path}/judgments_{j}.jsonl")],
                 "--out", f"panel={tmp_path}/panel.jsonl"]) == 0
    assert main(["model-rates", "--configfile", str(cfg), "--in", f"dataset={tmp_path}/dataset.jsonl",
                 "--in", f"panel_0={tmp_path}/panel.jsonl", "--out", f"model_rates={tmp_path}/rates.csv"]) == 0
    panel = {r["item_id"]: r for r in read_jsonl(tmp_path / "panel.jsonl")}
    assert panel["item001"]["safety"] == "rollout_failed"
    # each judge asked about the 2 ok rollouts only; the failed one is not applicable, counted per judge job
    judge_summaries = summaries(tmp_path, "judge")
    assert [(s["llm"]["ok"] // 3, s["not_applicable"]) for s in judge_summaries] == [(2, 1)] * len(PANEL)
    (rates,) = pd.read_csv(tmp_path / "rates.csv").to_dict("records")
    # the fake answers every judge the first enum value (Safe): 2 judged items, both Safe, 1 excluded
    assert (rates["items"], rates["rollout_failed"], rates["all_n"], rates["all_unsafe"], rates["all_excluded"]) == \
        (3, 1, 2, 0, 1)


def test_failed_items_over_the_ceiling_fail_the_job(job, server, tmp_path, capsys):
    cfg = job(n_items=3, max_tries=2)
    server.set_rules([{"match": {"contains": "D001"}, "status": 503}, {"match": {"contains": "D002"}, "status": 503},
                      {"content": ROLLOUT}])
    assert main(rollout_args(cfg, tmp_path)) == 1
    err = capsys.readouterr().err.rstrip().splitlines()[-1]
    assert err.startswith("error: rollout:m: 2 of 3 items failed, over the ceiling of 1 (llm.max_failed_share=0.05, "
                          "llm.max_failed_items=1); no output written; reasons: 2x gave up after 2 tries: HTTP 503")
    assert not (tmp_path / "rollouts.jsonl").exists()
    calls = list(read_jsonl(tmp_path / "logs" / "rollout.calls.jsonl"))
    assert sorted(c["item_id"] for c in calls if c["status"] == "failed") == ["item001", "item002"]
    # a looser ceiling in config lets the same job through, re-asking only the failed items (item000 is cached)
    before = server.stats()["count"]
    cfg2 = job(n_items=3, llm={"max_failed_share": 1.0}, max_tries=2)
    assert main(rollout_args(cfg2, tmp_path)) == 0
    assert server.stats()["count"] - before == 4  # 2 failing items x 2 tries
    assert [r["status"] for r in read_jsonl(tmp_path / "rollouts.jsonl")] == ["ok", "failed", "failed"]


@pytest.mark.parametrize("sig,name,rc", [(signal.SIGINT, "SIGINT", 130), (signal.SIGTERM, "SIGTERM", 143)])
def test_call_log_and_cost_survive_an_interrupted_stage(job, server, tmp_path, sig, name, rc):
    """Ctrl-C or SIGTERM (Snakemake stopping a job) mid-stage: one line, exit 128 + signal, and the
    answered calls are in the call log and the summary, with their cost."""
    # the hanging requests must outlast the wait below however slow the machine: they never time out first
    cfg = job(n_items=12, max_concurrency=2, timeout_s=120)
    server.set_rules([{"times": 4, "content": ROLLOUT}, {"hang": True}])
    # SIGINT at its default in the job, however the suite was started: a shell's background job (`cmd &`)
    # ignores SIGINT, and children inherit that, so Ctrl-C would never reach the job
    proc = subprocess.Popen([sys.executable, "-m", "aura", *rollout_args(cfg, tmp_path)], env=ENV,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 60
    while server.stats()["count"] < 6 and time.monotonic() < deadline:  # 4 answered + 2 hanging
        time.sleep(0.05)
    # settle: the 4 answers are stored and logged, the job only waits on the 2 hanging requests (the
    # scenario under test), not mid-way through handling an answer when the signal lands
    time.sleep(0.5)
    proc.send_signal(sig)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == rc and "Traceback" not in stderr, stderr
    assert stderr.rstrip().splitlines()[-1] == f"error: rollout:m: stopped by {name}; call log and summary written, no output"
    calls = list(read_jsonl(tmp_path / "logs" / "rollout.calls.jsonl"))
    assert len(calls) == 4 and all(c["status"] == "ok" and not c["cache_hit"] for c in calls)
    (summary,) = summaries(tmp_path, "rollout")
    assert summary["status"] == "failed" and summary["error"] == f"stopped by {name}"
    # fake server: prompt tokens len(prompt)//4, completion len(ROLLOUT)//4; price 1 and 2 $/Mtok
    assert summary["llm"]["cost_usd"] == pytest.approx(sum(c["tokens_in"] * 1e-6 + c["tokens_out"] * 2e-6 for c in calls))
    assert summary["llm"]["calls"] == 4 and summary["llm"]["tokens_out"] == 4 * (len(ROLLOUT) // 4)
    assert not (tmp_path / "rollouts.jsonl").exists()


# ---------------------------------------------------------------------------------------------
# Fault injection: 20% of requests fault, one seventh of that (2.86%) for each kind
FAULTS = [
    {"status": 429, "retry_after": 0.05},
    {"status": 500},
    {"status": 503},
    {"hang": True},  # past the client's timeout
    {"empty_choices": True},
    {"malformed_body": True},  # a 200 whose body is cut off
    {"match": {"response_format_type": "json_schema"}, "content": "Sorry, I cannot answer in JSON."},
]


def fault_rules() -> list[dict]:
    width = 0.2 / len(FAULTS)
    rules = []
    for k, fault in enumerate(FAULTS):
        match = {**fault.get("match", {}), "sample": [k * width, (k + 1) * width]}
        rules.append({**{key: v for key, v in fault.items() if key != "match"}, "match": match})
    return rules + [{"match": {"response_format_type": "json_schema"}, "echo_schema_default": True},
                    {"content": ROLLOUT}]


def test_fault_injection_chain_completes_and_rerun_repays_nothing(job, server, tmp_path, capsys):
    n = 40
    # timeout 2 s: a hang still times out, and on a loaded machine (parallel test workers) an answered request does
    # not (with 0.5 s, an attempt could time out before the server had even read it: one attempt more than requests)
    cfg = job(n_items=n, llm={"max_failed_share": 0.2}, timeout_s=2.0, max_tries=6, max_concurrency=8,
              backoff_base_s=0.01, backoff_max_s=0.05)
    server.set_rules(fault_rules())
    assert main(rollout_args(cfg, tmp_path)) == 0
    assert main(judge_args(cfg, tmp_path)) == 0
    requests = server.stats()["count"]
    calls = [c for name in ("rollout", "judge") for c in read_jsonl(tmp_path / "logs" / f"{name}.calls.jsonl")]
    rollouts = list(read_jsonl(tmp_path / "rollouts.jsonl"))
    judgments = list(read_jsonl(tmp_path / "judgments.jsonl"))
    # every item answered or listed with its reason
    assert sorted(r["item_id"] for r in rollouts) == [d["item_id"] for d in dataset(n)]
    ok_rollouts = [r for r in rollouts if r["status"] == "ok"]
    assert len(judgments) == 3 * len(ok_rollouts)  # three axes per judged rollout
    for row in rollouts + judgments:
        assert row["status"] == "ok" or (row["status"] in ("failed", "unparsed") and row["error"]), row
    # every request the server received is one attempt in a call log: nothing unaccounted for
    assert requests == sum(c["attempts"] for c in calls if not c["cache_hit"])
    retries = sum(c["attempts"] - 1 for c in calls if not c["cache_hit"])
    faulted = requests - sum(1 for c in calls if c["status"] == "ok" and not c["cache_hit"])
    assert retries >= 1 and faulted >= retries
    failed = [r for r in rollouts + judgments if r["status"] == "failed"]
    unparsed = [r for r in rollouts + judgments if r["status"] == "unparsed"]
    print(f"\nfault injection: items={len(rollouts) + len(judgments)} requests={requests} retries={retries} "
          f"repairs={sum(c['purpose'] == 'repair' for c in calls)} failed={len(failed)} unparsed={len(unparsed)}")

    # the rerun (outputs removed, same cache) asks again only what failed: no successful call is repaid
    answered = {c["key"] for c in calls if c["status"] == "ok"}
    before = server.stats()["count"]
    assert main(rollout_args(cfg, tmp_path, out="rollouts2.jsonl", calls="rollout2.calls.jsonl")) == 0
    assert main(judge_args(cfg, tmp_path, rollouts="rollouts2.jsonl", out="judgments2.jsonl",
                           calls="judge2.calls.jsonl")) == 0
    again = [c for name in ("rollout2", "judge2") for c in read_jsonl(tmp_path / "logs" / f"{name}.calls.jsonl")]
    assert not [c for c in again if not c["cache_hit"] and c["key"] in answered]
    assert server.stats()["count"] - before == sum(c["attempts"] for c in again if not c["cache_hit"])
    failed_ids = {r["item_id"] for r in failed}
    assert {c["item_id"] for c in again if not c["cache_hit"]} <= failed_ids
    assert [r for r in read_jsonl(tmp_path / "rollouts2.jsonl") if r["item_id"] not in failed_ids] == \
        [r for r in rollouts if r["item_id"] not in failed_ids]


# ---------------------------------------------------------------------------------------------


def test_snakemake_ends_with_one_summary_line_per_stage(server, tmp_path):
    copy_workflow(tmp_path)
    raw = base_config(server.base_url, tmp_path / "cache")
    raw["paths"]["seeds"] = str(scripted.write_seed_dir(tmp_path / "seeds"))
    raw["paths"]["logs"] = str(tmp_path / "logs")
    (tmp_path / "config" / "test.yaml").write_text(yaml.safe_dump(raw))
    target = f"{raw['paths']['interim']}/tags.jsonl"

    def snakemake() -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "snakemake", target, "--cores", "1", "--configfile",
                               "config/test.yaml"], cwd=tmp_path, capture_output=True, text=True, timeout=300, env=ENV)

    server.set_rules([{"status": 401, "message": "Incorrect API key provided"}])
    out = snakemake()
    assert out.returncode != 0
    (line,) = [x for x in out.stderr.splitlines() if x.startswith("aura summary:")]
    assert line.startswith("aura summary: tag-truncate (1 job): items ok=0 unparsed=0 failed=0 n/a=0; calls=1 ")
    assert line.endswith(f"1 job(s) FAILED, first: tag-truncate: endpoint 'fake' ({server.base_url}), model "
                         f"'fake-model': non-retryable HTTP 401: AuthenticationError: Incorrect API key provided")
    assert not Path(target).exists()

    server.set_rules(scripted.rules())
    out = snakemake()
    assert out.returncode == 0, out.stderr[-3000:]
    (line,) = [x for x in out.stderr.splitlines() if x.startswith("aura summary:")]
    assert line.startswith("aura summary: tag-truncate (1 job): items ok=1 unparsed=0 failed=0 n/a=0; calls=1 ")
