"""Kills and concurrency (issue 8 §4): `kill -9` of a job mid-stage, then a rerun, pays no answered
call twice, leaves nothing half-written and ends with the outputs of an uninterrupted run; two
processes writing one cache key, and a reader meeting a half-written entry, are safe."""
from __future__ import annotations

import json
import multiprocessing
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import yaml

from aura.io import read_jsonl, write_jsonl
from aura.llm import Cache, LLMClient, LLMRequest
from conftest import REPO, base_config

ENV = {**os.environ, "PYTHONPATH": str(REPO / "src")}
ROLLOUT = "[AGENT_THOUGHT] Check first.\n[AGENT_ACTION] ListDevices: {}"
N, ANSWERED = 30, 8


def _setup(server, tmp: Path, cache: str) -> list[str]:
    raw = base_config(server.base_url, tmp / cache, max_concurrency=2)
    raw["paths"]["logs"] = str(tmp / "logs")
    cfg = tmp / f"{cache}.yaml"
    cfg.write_text(yaml.safe_dump(raw))
    write_jsonl(tmp / "dataset.jsonl", [
        {"item_id": f"item{i:03d}", "profile": "You are a home assistant.", "model_input": f"[USER] switch off D{i:03d}"}
        for i in range(N)])
    return [sys.executable, "-m", "aura", "rollout", "--configfile", str(cfg), "--model", "m",
            "--in", f"dataset={tmp}/dataset.jsonl"]


def _entries(cache: Path) -> list[Path]:
    return sorted(p for p in cache.glob("*/*.json") if not p.name.startswith("."))


def test_sigkill_mid_stage_then_rerun_repays_nothing(server, tmp_path):
    # the first ANSWERED requests are answered, every later one hangs: the kill finds 8 answers and 2 open calls
    server.set_rules([{"times": ANSWERED, "content": ROLLOUT}, {"hang": True}])
    cmd = _setup(server, tmp_path, "cache")
    out = tmp_path / "out" / "rollouts.jsonl"
    proc = subprocess.Popen([*cmd, "--out", f"rollouts={out}"], env=ENV, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while (len(_entries(tmp_path / "cache")) < ANSWERED or server.stats()["count"] < ANSWERED + 2) \
            and time.monotonic() < deadline:
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(30)
    assert proc.returncode == -signal.SIGKILL
    # every answer that arrived is in the cache (written the moment it arrived), whole and readable
    cached = _entries(tmp_path / "cache")
    assert len(cached) == ANSWERED
    assert all(json.loads(p.read_text())["response"]["text"] == ROLLOUT for p in cached)
    assert server.stats()["count"] == ANSWERED + 2  # no request after the 2 that hang (max_concurrency 2)
    # no half-written output: not the file, not a temp file beside it
    assert not out.exists() and not (out.parent.exists() and list(out.parent.iterdir()))

    server.reset()
    server.set_rules([{"content": ROLLOUT}])
    subprocess.run([*cmd, "--out", f"rollouts={out}"], env=ENV, check=True, capture_output=True, timeout=120)
    assert server.stats()["count"] == N - ANSWERED  # the 8 answered calls come from the cache

    # an uninterrupted run (fresh cache) writes the same rows
    fresh = _setup(server, tmp_path, "fresh_cache")
    subprocess.run([*fresh, "--out", f"rollouts={tmp_path}/fresh.jsonl"], env=ENV, check=True, capture_output=True,
                   timeout=120)
    assert server.stats()["count"] == 2 * N - ANSWERED
    assert list(read_jsonl(out)) == list(read_jsonl(tmp_path / "fresh.jsonl"))


ENTRY_KEY = "ab" + "c" * 62


def _entry(i: int = 0) -> dict:
    return {"key": ENTRY_KEY, "request": {"model": "m"}, "created": 0,
            "response": {"text": "ünïcode answer " * 50, "finish_reason": "stop", "id": "x", "model": "m",
                         "usage": {"prompt_tokens": 3, "completion_tokens": 4}}}


def _writer(root: str, n: int) -> None:
    cache = Cache(root)
    for _ in range(n):
        cache.put(ENTRY_KEY, _entry())


def test_two_processes_write_one_key_while_a_reader_reads(tmp_path):
    ctx = multiprocessing.get_context("spawn")
    writers = [ctx.Process(target=_writer, args=(str(tmp_path), 300)) for _ in range(2)]
    for w in writers:
        w.start()
    seen = []
    while any(w.is_alive() for w in writers):
        seen.append(Cache(tmp_path).get(ENTRY_KEY))  # a fresh listing each time, as another job would
    for w in writers:
        w.join(30)
        assert w.exitcode == 0
    # a reader sees a miss (not yet written) or the whole entry, never a part of one
    assert all(s is None or s == _entry() for s in seen)
    assert Cache(tmp_path).get(ENTRY_KEY) == _entry()
    assert [p.name for p in tmp_path.rglob("*") if p.is_file()] == [f"{ENTRY_KEY}.json"]  # no temp file left


def test_half_written_entry_is_a_miss_and_is_replaced(make_config, server):
    cfg = make_config()
    req = LLMRequest(item_id="it0", messages=[{"role": "user", "content": "Is this safe?"}], prompt_name="t.v1",
                     prompt_sha256="0" * 64)
    key = LLMClient(cfg).prepare("m", req)[3]
    cache = Cache(cfg.paths["cache"])
    path = cache.path(key)
    path.parent.mkdir(parents=True)
    whole = json.dumps({**_entry(), "key": key}, ensure_ascii=False).encode()
    cut_mid_char = whole[: whole.index("ü".encode()) + 1]  # the first byte of a 2-byte UTF-8 character
    for partial in (b"", whole[: len(whole) // 2], cut_mid_char, b"{}", json.dumps(_entry()).encode()):  # last: other key
        path.write_bytes(partial)
        assert Cache(cfg.paths["cache"]).get(key) is None, partial[:40]
    # a job meeting the half-written entry asks again and replaces it with the whole answer
    path.write_bytes(whole[: len(whole) // 2])
    with LLMClient(cfg) as llm:
        (res,) = llm.run("judge", "m", [req])
    assert res.status == "ok" and res.text == "ok" and server.stats()["count"] == 1
    assert Cache(cfg.paths["cache"]).get(key)["response"]["text"] == "ok"
    # a leftover temp file of a killed writer is not an entry
    (path.parent / f".{key}.123.0.tmp").write_bytes(whole[:10])
    assert Cache(cfg.paths["cache"]).get(key)["response"]["text"] == "ok"
