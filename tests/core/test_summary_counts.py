"""The end-of-run counts say what the rows hold (issue 32 §5): a rollout answer without an action is an unparsed
row although the LLM layer got a whole answer, and the summary counts it unparsed; a broken cache entry is asked
again with one warning line naming it and counted as `cache_repaired`. Through the package CLI, real HTTP."""
from __future__ import annotations

import json
import subprocess
import sys

from aura.io import read_jsonl
from test_fail_loudly import ENV, ROLLOUT, job, rollout_args, summaries  # noqa: F401 - `job` is a fixture

NO_ACTION = "I would rather think about it."


def aura(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "aura", *args], capture_output=True, text=True, timeout=120, env=ENV)


def summary_line(cfg) -> str:
    (line,) = [x for x in aura("summary", "--configfile", str(cfg)).stderr.splitlines() if x.startswith("aura summary:")]
    return line


def test_the_summary_counts_unparsed_rows_the_llm_layer_saw_as_whole_answers(job, server, tmp_path):
    cfg = job(n_items=4)
    server.set_rules([{"match": {"contains": "D001"}, "content": NO_ACTION},
                      {"match": {"contains": "D002"}, "content": NO_ACTION}, {"content": ROLLOUT}])
    out = aura(*rollout_args(cfg, tmp_path))
    assert out.returncode == 0, out.stderr[-2000:]
    statuses = sorted(r["status"] for r in read_jsonl(tmp_path / "rollouts.jsonl"))
    assert statuses == ["ok", "ok", "unparsed", "unparsed"]
    (summary,) = summaries(tmp_path, "rollout")
    assert (summary["llm"]["ok"], summary["llm"]["unparsed"]) == (4, 0)  # the layer saw four whole answers ...
    line = summary_line(cfg)
    assert "items ok=2 unparsed=2 failed=0" in line  # ... the line says what the rows hold
    assert "failed/unparsed items are listed with their reason in" in line


def test_a_broken_cache_entry_is_asked_again_with_one_warning_and_counted(job, server, tmp_path):
    cfg = job(n_items=3)
    server.set_rules([{"content": ROLLOUT}])
    assert aura(*rollout_args(cfg, tmp_path)).returncode == 0
    entries = sorted((tmp_path / "cache").glob("*/*.json"))
    assert len(entries) == 3 and server.request_count() == 3
    broken = entries[0]
    broken.write_bytes(broken.read_bytes()[: broken.stat().st_size // 2])  # cut in half
    out = aura(*rollout_args(cfg, tmp_path, out="again.jsonl", calls="again.calls.jsonl"))
    assert out.returncode == 0, out.stderr[-2000:]
    warnings = [x for x in out.stderr.splitlines() if x.startswith("warning: cache entry")]
    assert warnings == [f"warning: cache entry {broken} is not a whole answer (cut short, empty or not JSON): "
                        f"asked again, and the answer replaces it"]
    assert server.request_count() == 4  # that one was asked again, the others were hits
    assert json.loads(broken.read_text())["response"]["text"] == ROLLOUT  # and its answer replaced the broken file
    again = [s for s in summaries(tmp_path, "rollout") if s["outputs"][0].endswith("again.jsonl")]
    assert again[0]["llm"]["cache_repaired"] == 1
    assert " cache_repaired=1 " in summary_line(cfg)


def test_since_says_what_this_invocation_ran_before_the_folder_totals(job, server, tmp_path):
    # the Snakefile passes --since (its start): a rebuild that ran no model job says so first; the folder's
    # totals, earlier runs included, follow under their own label
    import time

    cfg = job(n_items=2)
    server.set_rules([{"content": ROLLOUT}])
    assert aura(*rollout_args(cfg, tmp_path)).returncode == 0
    later = aura("summary", "--configfile", str(cfg), "--since", str(time.time())).stderr.splitlines()
    assert later[0] == "aura summary (this run): 0 stage job(s) finished, 0 model call(s), 0 cache hit(s): no model call"
    assert later[1] == "aura totals (the run folder, every current job of this and earlier runs):"
    assert later[2].startswith("aura totals: rollout (1 job): items ok=2 ") and " calls=2 " in later[2]
    assert not [x for x in later if x.startswith("aura summary: rollout")]
    before = aura("summary", "--configfile", str(cfg), "--since", "0").stderr.splitlines()
    assert before[0] == "aura summary (this run): 1 stage job(s) finished, 2 model call(s), 0 cache hit(s)"
    assert before[1].startswith("aura summary: rollout (1 job): items ok=2 ")
    assert before[2] == "aura totals (the run folder): the same as above"


def test_infrastructure_retries_add_up_apart_from_the_llm_retries(tmp_path):
    """Job summaries as StageContext.finish writes them: a stage's tries repeated for its infrastructure add up
    in their own field; a stage with none says nothing of them."""
    from aura.pipeline.summary import collect, lines

    out = tmp_path / "out.jsonl"
    out.write_text("")
    llm = {"ok": 1, "unparsed": 0, "failed": 0, "calls": 2, "cache_hits": 0, "retries": 1, "tokens_out": 3,
           "tokens_reasoning": 0, "cost_usd": 0.0, "cpu_s": 0.1}
    for i, (stage, infra) in enumerate([("episodes", 1), ("episodes", 2), ("judge", 0)]):
        path = tmp_path / "logs" / "summary" / stage / f"job{i}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"stage": stage, "label": f"{stage}:{i}", "status": "ok", "error": None,
                                    "outputs": [str(out)], "finished": i, "llm": llm, "not_applicable": 0,
                                    "row_statuses": {}, "infra_retries": infra}))
    episodes, judge = lines(collect(tmp_path / "logs"))
    assert " retries=2 infra_retries=3 tokens_out=6 " in episodes
    assert " retries=1 tokens_out=3 " in judge and "infra_retries" not in judge
