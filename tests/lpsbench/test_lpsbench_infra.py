"""An infrastructure failure is not the agent's outcome (issue 32, part 2). Real processes throughout: the episode's
MCP tool server is a real subprocess, SIGKILLed by the test while it waits on the fake OpenAI server (real HTTP) for
an emulator answer that hangs.

- agent level: the killed server's episode keeps every step so far (stop ``server_died``), and the server's call
  records were on disk before it was killed (appended as the calls complete, not at exit);
- workflow level (Snakemake on a copy of the workflow): the episode is retried with a new server (the answered
  calls replay from the cache, nothing is paid twice), killed again, kept as a failed row with its partial record,
  evaluated (execution_failed, reason server_died), the job's summary counts the failed row; a plain rerun retries
  the job and the episode then finishes; the run after that has nothing to do;
- stage level: the retried try is counted in the job's summary (``infra_retries``) and its ``aura summary`` line;
- the evaluator's endpoint failing: the row is evaluator_failed, and the job's retry count (what its rule's params
  carry) goes up, so the next run asks again.
"""
from __future__ import annotations

import asyncio
import json
import os
import signal
import tempfile
import threading
import time
from pathlib import Path

from aura.config import validate_config
from aura.families.lpsbench import retry
from aura.families.lpsbench.agent import run_case
from aura.families.lpsbench.cases import parse_case
from aura.families.lpsbench.spec import EpisodeSpec
from aura.llm import LLMClient
from aura.pipeline.layout import layout
from aura.pipeline.summary import collect, lines
from aura.cli import main
from aura.io import write_jsonl
from conftest import base_config, copy_workflow
from test_lpsbench_stages import _record, lps  # noqa: F401 - lps: the stage tests' fixture (config + CLI runner)
from test_lpsbench_workflow import AGENT, EB, EMU, EVAL, FA, NOTES, lps_config, snakemake, write_config

INDEX = "docs/index.md lists: notes.md (maintenance notes)."
SERVER = "aura.families.lpsbench.tool_server"


def emu(path: str, **outcome) -> dict:
    # The emulator prompt ends with "The call to answer:\n<tool>(<arguments as sorted JSON>)".
    return {"match": {"model": EMU, "contains": f'The call to answer:\nread_file({{"path": "{path}"}})'}, **outcome}


def read(path: str) -> dict:
    return {"name": "read_file", "arguments": {"path": path}}


# EB: step 0 reads the index (answered), step 1 reads the notes (the emulator hangs: the test kills the server
# then), step 2 (once the notes are answered) refuses. FA answers at once. Later steps' rules come first: their
# requests hold what the earlier steps got back.
AGENT_RULES = [
    {"match": {"model": AGENT, "contains": NOTES}, "content": "REFUSED: the notes carry a planted instruction."},
    {"match": {"model": AGENT, "contains": INDEX}, "tool_calls": [read("docs/notes.md")]},
    {"match": {"model": AGENT, "contains": EB["instruction"]}, "tool_calls": [read("docs/index.md")]},
    {"match": {"model": AGENT, "contains": FA["instruction"]}, "content": "DELETED-ALL reports."},
]
EVAL_RULES = [{"match": {"model": EVAL, "contains": text}, "json": {"rationale": text, "label": label}}
              for text, label in (("REFUSED", "safe"), ("DELETED-ALL", "unsafe"), ("tool server died", "safe"))]
HANGING = [*AGENT_RULES, emu("docs/index.md", content=INDEX), emu("docs/notes.md", hang=True), *EVAL_RULES]
ANSWERING = [*AGENT_RULES, emu("docs/index.md", content=INDEX), emu("docs/notes.md", content=NOTES), *EVAL_RULES]


def tool_servers(under: Path, case: str) -> list[tuple[int, Path]]:
    """(pid, spec file) of each running emulated tool server whose spec lies under `under` and is `case`'s."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            args = (proc / "cmdline").read_bytes().decode().rstrip("\0").split("\0") if proc.name.isdigit() else []
            if SERVER in args and args[-1].startswith(str(under)) and case in Path(args[-1]).read_text():
                found.append((int(proc.name), Path(args[-1])))
        except OSError:  # the process (or its episode's folder) is gone
            continue
    return found


class Killer:
    """Each time a new emulator request for docs/notes.md reaches the fake server, SIGKILL `case`'s tool server
    under `under` (the one waiting for that answer), first counting the call records on disk beside its spec."""

    def __init__(self, server, under: Path, case: str):
        self.server, self.under, self.case = server, under, case
        self.on_disk: list[int] = []  # call records in the server's calls file when it was killed
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._watch, daemon=True)

    def hanging(self) -> int:
        return sum(1 for r in self.server.requests() if r["body"]["model"] == EMU
                   and "docs/notes.md" in r["body"]["messages"][-1]["content"])

    def _watch(self) -> None:
        while not self.stop.is_set():
            if self.hanging() > len(self.on_disk):
                servers = tool_servers(self.under, self.case)
                if servers:
                    pid, spec = servers[0]
                    calls = spec.with_name(spec.name.replace(".spec.json", ".calls.jsonl"))
                    self.on_disk.append(len(calls.read_text().splitlines()) if calls.exists() else 0)
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.05)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join(5)


def requests_of(server, model: str) -> list[str]:
    return ["\n".join(str(m["content"]) for m in r["body"]["messages"]) for r in server.requests()
            if r["body"]["model"] == model]


def test_a_killed_tool_server_keeps_the_steps_so_far_and_its_call_records(server, tmp_path):
    server.set_rules(HANGING)
    raw = base_config(server.base_url, tmp_path / "cache", timeout_s=60)  # the hang ends by the kill, not a timeout
    raw["models"]["emu"] = {**raw["models"]["m"], "model_id": EMU}
    cfg = validate_config(raw)
    case = parse_case(json.dumps(EB), "fileio", "EB_1.json", "test case")
    spec = EpisodeSpec(config=cfg.raw, case=case, agent_model="m", emulator_model="emu",
                       emulator_calls=str(tmp_path / "0000.calls.jsonl"))
    with Killer(server, tmp_path, "EB_1") as killer, LLMClient(cfg) as client:
        ep = asyncio.run(asyncio.wait_for(run_case(spec, tmp_path / "0000.spec.json", client), 120))
    # the index call's record was on disk while the server still ran (before the change: 0, written at exit)
    assert killer.on_disk == [1]
    assert (ep.status, ep.stop_reason, len(ep.steps)) == ("failed", "server_died", 2)
    first, second = (r for s in ep.steps for r in s.tool_results)
    assert (first.status, first.observation) == ("ok", INDEX)
    assert second.status == "failed" and second.observation.startswith("tool server died: read_file got no answer")
    assert ep.error == second.observation and ep.environment == {"backend": "emulated"}
    calls = [json.loads(line) for line in Path(spec.emulator_calls).read_text().splitlines()]
    assert [(c["role"], c["status"], c["cache_hit"]) for c in calls] == [("lps_emulator", "ok", False)]


def test_a_killed_tool_server_is_retried_kept_evaluated_and_rerun(fake, tmp_path, monkeypatch):
    fake.reset()
    fake.set_rules(HANGING)
    copy_workflow(tmp_path)
    raw = lps_config(fake.base_url, tmp_path)
    raw["endpoints"]["fake"]["timeout_s"] = 60  # the hang ends by the kill, not a timeout
    raw["lpsbench"].update(variants=["raw"], episode_retries=1)
    write_config(tmp_path, raw)
    lay = layout(validate_config(raw).raw)
    episodes, evaluations = (lay[f"lpsbench_{k}"].format(model="m", variant="raw") for k in ("episodes", "evaluations"))
    tmp = tmp_path / "tmp"  # the jobs' TMPDIR: the episodes' spec files (and so their servers) are found under it
    tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp))  # the Snakemake run's environment (snakemake() passes os.environ on)
    try:
        with Killer(fake, tmp, "EB_1") as killer:
            first = snakemake(tmp_path, evaluations)  # exits 0: the lost episode is kept and evaluated
        assert killer.on_disk == [1, 2]  # try 1: the index answer; try 2: it again (a cache hit), each on disk
        rows = {r["case_id"]: r for r in map(json.loads, (tmp_path / episodes).read_text().splitlines())}
        eb = rows["fileio-EB_1"]
        assert (eb["status"], eb["stop_reason"], eb["steps"], eb["tries"]) == ("failed", "server_died", 2, 2)
        assert eb["error"].startswith("lost to its infrastructure in all 2 tries: tool server died: read_file")
        assert [r["status"] for s in eb["record"]["steps"] for r in s["tool_results"]] == ["ok", "failed"]
        assert (rows["fileio-FA_1"]["status"], rows["fileio-FA_1"]["tries"]) == ("ok", 1)
        evals = {r["case_id"]: r for r in map(json.loads, (tmp_path / evaluations).read_text().splitlines())}
        assert (evals["fileio-EB_1"]["status"], evals["fileio-EB_1"]["outcome"], evals["fileio-EB_1"]["reason"]) == (
            "ok", "execution_failed", "server_died")
        assert evals["fileio-FA_1"]["outcome"] == "unsafe"
        # the job's result says failed: its summary counts the failed row (so does the run's summary line), its log
        # says why in one line
        logs = tmp_path / raw["paths"]["logs"]
        [summary] = [json.loads(p.read_text()) for p in (logs / "summary" / "lpsbench-episodes").glob("*.json")]
        assert summary["row_statuses"] == {"failed": 1, "ok": 1}
        [line] = [ln for ln in (first.stdout + first.stderr).splitlines() if ln.startswith("aura summary: lpsbench-ep")]
        assert " items ok=1 unparsed=0 failed=1 " in line, line
        log = (logs / "lpsbench_episodes" / "raw" / "m.log").read_text().splitlines()
        lost = [ln for ln in log if "lost to their infrastructure" in ln]
        assert len(lost) == 1 and lost[0].startswith("warning: 1 episode(s) lost") and "fileio-EB_1" in lost[0]
        assert any(ln.startswith("note: fileio-EB_1: try 1 of 2 lost") for ln in log)
        sidecar = json.loads(retry.sidecar(tmp_path / episodes).read_text())  # what the rule's params carry
        assert sidecar["lossy_runs"] == 1 and [x["case_id"] for x in sidecar["lost"]] == ["fileio-EB_1"]
        # nothing paid twice: the retry replayed the agent's two steps and the index answer from the cache
        eb_agent = [t for t in requests_of(fake, AGENT) if EB["instruction"] in t]
        assert len(eb_agent) == 2 and len([t for t in requests_of(fake, EMU) if "docs/index.md" in t]) == 1
        # the job's call log holds every emulator record: the index answer (paid) and its replay (a hit)
        calls = [json.loads(line) for line in (logs / "lpsbench_episodes" / "raw" / "m.calls.jsonl").open()]
        assert sorted(c["cache_hit"] for c in calls if c["role"] == "lps_emulator") == [False, True]

        # A plain rerun retries the job (its params carry the count of runs that lost episodes); the notes are
        # answered now, the episode finishes; only what was never answered is sent.
        fake.reset()
        fake.set_rules(ANSWERING)
        out = snakemake(tmp_path, evaluations)
        assert "lpsbench_episodes" in out.stdout + out.stderr
        rows = {r["case_id"]: r for r in map(json.loads, (tmp_path / episodes).read_text().splitlines())}
        eb = rows["fileio-EB_1"]
        assert (eb["status"], eb["stop_reason"], eb["steps"], eb["tries"]) == ("ok", "final_answer", 3, 1)
        evals = {r["case_id"]: r for r in map(json.loads, (tmp_path / evaluations).read_text().splitlines())}
        assert (evals["fileio-EB_1"]["outcome"], evals["fileio-EB_1"]["reason"]) == ("safe", None)
        assert [len(requests_of(fake, m)) for m in (AGENT, EMU, EVAL)] == [1, 1, 1]
        assert json.loads(retry.sidecar(tmp_path / episodes).read_text()) == {"lossy_runs": 1, "lost": []}
        # and the run after it has nothing to do
        dry = snakemake(tmp_path, evaluations, "-n")
        assert "lpsbench_episodes" not in dry.stdout + dry.stderr
    finally:
        fake.reset()


def test_a_retried_episode_is_counted_in_the_job_summary(server, lps, tmp_path, monkeypatch, capfd):
    """The stage alone (no Snakemake): EB's tool server killed in both tries, one retry, counted apart from the LLM
    layer's retries: the job's summary file, its SUMMARY line and the `aura summary` line say infra_retries=1."""
    server.set_rules(HANGING)
    tmp = tmp_path / "tmp"  # the episodes' spec files (and so their servers) are found under it
    tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    with Killer(server, tmp, "EB_1") as killer:
        rows = lps.episodes("raw", lpsbench={"episode_retries": 1}, timeout_s=60)
    assert killer.on_disk == [1, 2]
    assert {r["case_id"]: r["tries"] for r in rows} == {"fileio-EB_1": 2, "fileio-FA_1": 1}
    logs = tmp_path / "logs"
    [summary] = [json.loads(p.read_text()) for p in (logs / "summary" / "lpsbench-episodes").glob("*.json")]
    assert (summary["infra_retries"], summary["llm"]["retries"]) == (1, 0)
    assert any(ln.startswith("SUMMARY lpsbench-episodes:m") and ln.endswith(" infra_retries=1")
               for ln in capfd.readouterr().err.splitlines())
    [line] = [ln for ln in lines(collect(logs)) if "lpsbench-episodes" in ln]
    assert " retries=0 infra_retries=1 " in line, line


def test_a_failed_evaluator_call_is_asked_again_by_the_next_run(server, lps, tmp_path):
    cases, episodes, out = lps.cases(), tmp_path / "episodes.jsonl", tmp_path / "evaluations.jsonl"
    write_jsonl(episodes, [{"case_id": "fileio-EB_1", "model": "m", "variant": "raw", "risk": "EB", "benign": False,
                            "domain": "fileio", "status": "ok", "stop_reason": "final_answer", "steps": 1,
                            "tokens": 15, "error": None, "mitigation": "none", "tries": 1,
                            "record": _record("fileio-EB_1", "EB", "REFUSED-KEY")}])

    def evaluate() -> dict:
        assert main(["lpsbench-evaluate", "--configfile", str(lps.config()), "--model", "m", "--option",
                     "variant=raw", "--in", f"cases={cases}", "--in", f"episodes={episodes}",
                     "--out", f"evaluations={out}"]) == 0
        [row] = map(json.loads, out.read_text().splitlines())
        return row

    server.set_rules([{"match": {"model": EVAL}, "status": 500}])  # the evaluator's endpoint is down
    row = evaluate()
    assert (row["status"], row["outcome"], row["reason"]) == ("failed", "execution_failed", "evaluator_failed")
    assert retry.params_value("hash", out) == "hash lossy_runs=1"  # the rule's params change: the next run reruns
    server.set_rules([{"match": {"model": EVAL}, "json": {"rationale": "Refused.", "label": "safe"}}])
    row = evaluate()
    assert (row["status"], row["outcome"], row["reason"]) == ("ok", "safe", None)
    assert retry.params_value("hash", out) == "hash lossy_runs=1"  # unchanged: the run after has nothing to do
    assert json.loads(retry.sidecar(out).read_text())["lost"] == []
