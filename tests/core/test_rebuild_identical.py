"""A released cache rebuilds the outputs offline, byte for byte (issue 13, part 4).

`built`: one small PaSBench run (one evaluated model, N = 2, propose-verify on, probes and construction off) on its own fake server
fills the cache; `aura cache export` packs the entries its call logs name; the server is stopped; the archive is
imported (`aura cache import`) into two fresh copies of the workflow, each rebuilt with a different `--cores` at a
different time, with the endpoint's API key variable unset. Every output (stage JSONL, stats CSVs, tables, one PDF + PNG pair per figure) is then equal byte for
byte across the original run and both rebuilds, and every provenance sidecar is equal once its `run` field (time,
host, folder, process) is left out. The archive tests below work on a hand-made cache (three entries).
"""
from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import socket
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest
import yaml

import scripted
from aura.cli import main
from aura.llm.cache import Cache
from aura.llm.cache_archive import FORMAT, MANIFEST, member_name
from aura.provenance import RUN_FIELD, git_state, without_run
from conftest import REPO, base_config, copy_workflow
from aura.simulator.server import FakeOpenAIServer

KEY_ENV = "AURA_REBUILD_TEST_KEY"  # the endpoint's key variable: set for the original run only
ENV = {**{k: v for k, v in os.environ.items() if k != KEY_ENV}, "PYTHONPATH": str(REPO / "src")}
REPORTS = ("pasbench_fig4_text_rates",)  # a figure (PDF + PNG) with its table (CSV + Markdown)
OUTPUT_DIRS = ("interim", "results", "figures")


def aura(cwd, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    out = subprocess.run([sys.executable, "-m", "aura", *args], cwd=cwd, capture_output=True, text=True,
                         timeout=300, env=ENV)
    if check:
        assert out.returncode == 0, out.stderr[-3000:]
    return out


def snakemake(workdir, cores: int, key: str | None = None) -> None:
    targets = [f"results/pasbench/stats/{name}.csv" for name in ("rates", "k_curves", "word_length", "image_count",
                                                                   "severity", "pearson_models", "pearson_samples",
                                                                   "propose_verify")]
    targets += [f"figures/{name}.pdf" for name in REPORTS]
    out = subprocess.run([sys.executable, "-m", "snakemake", *targets, "--cores", str(cores),
                          "--configfile", "config/test.yaml"], cwd=workdir, capture_output=True, text=True,
                         timeout=600, env={**ENV, KEY_ENV: key} if key else ENV)
    assert out.returncode == 0, (out.stdout + out.stderr)[-4000:]


def small_config(url: str) -> dict:
    """Relative paths (as the default config's), so the config, and with it every sidecar's config hash, is the
    same file in every copy of the workflow."""
    raw = base_config(url, Path("cache/llm"), api_key_env=KEY_ENV)
    raw["paths"] = {"cache": "cache/llm", "interim": "interim", "processed": "processed", "results": "results",
                    "logs": "logs", "figures": "figures", "seeds": "seeds"}
    raw["families"] = ["pasbench"]
    raw["pasbench"] = {"samples": 2, "evaluated": ["m"], "judge": "jb", "bootstrap": {"resamples": 20, "seed": 1},
                       "knowledge_probe": False, "reactive_probe": False, "propose_verify": True,
                       "construct": {"enabled": False}}
    return raw


def workflow_copy(template: Path, path: Path) -> Path:
    """A fresh folder from one copy of the workflow files and config (the repository's may change meanwhile)."""
    shutil.copytree(template, path)
    return path


def code_fingerprint() -> str:
    """What the sidecars' `git` and `config_hash` follow and this test does not hold still: the package's git state
    and the schema whose defaults enter the config hash (other work in a shared tree may commit during the test)."""
    return hashlib.sha256(json.dumps(git_state(), sort_keys=True).encode()
                          + (REPO / "config" / "schema.yaml").read_bytes()).hexdigest()


def outputs(workdir: Path) -> dict[str, Path]:
    return {str(p.relative_to(workdir)): p for d in OUTPUT_DIRS for p in sorted((workdir / d).rglob("*"))
            if p.is_file()}


def calls(workdir: Path) -> list[dict]:
    return [json.loads(line) for f in sorted((workdir / "logs").rglob("*.calls.jsonl"))
            for line in f.read_text().splitlines() if line.strip()]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """(original run, rebuild with 1 core, rebuild with 2 cores, archive, its second export, code fingerprint)."""
    tmp = tmp_path_factory.mktemp("rebuild")
    server = FakeOpenAIServer([{"match": {"model": "judge-b", "contains": "carbon monoxide"},
                                "json": {"rationale": "names the carbon monoxide risk", "detected": True}},
                               *scripted.pasbench_rules()]).start()
    try:
        template = copy_workflow(tmp / "workflow")
        (template / "config" / "test.yaml").write_text(yaml.safe_dump(small_config(server.base_url)))
        code_before = code_fingerprint()
        orig = workflow_copy(template, tmp / "orig")
        snakemake(orig, 2, key="sk-test")
        live = server.stats()["count"]
        assert live > 0
        aura(orig, "cache", "export", "--configfile", "config/test.yaml", "--out", str(tmp / "release.tar.gz"))
        aura(orig, "cache", "export", "--configfile", "config/test.yaml", "--out", str(tmp / "again.tar.gz"))
    finally:
        server.stop()
    host, port = server.host, server.port
    with pytest.raises(OSError):  # nothing listens where the config points any more
        socket.create_connection((host, port), timeout=1).close()
    rebuilds = []
    for name, cores in (("rebuild1", 1), ("rebuild2", 2)):
        work = workflow_copy(template, tmp / name)  # a fresh folder: the released cache is its only cache
        aura(work, "cache", "import", str(tmp / "release.tar.gz"), "--configfile", "config/test.yaml")
        time.sleep(1.1)  # a different second on the clock than the run before it
        snakemake(work, cores)  # no key in the environment either
        rebuilds.append(work)
    yield orig, *rebuilds, tmp / "release.tar.gz", tmp / "again.tar.gz", code_before


def test_export_lists_every_entry_the_run_used_and_is_deterministic(built):
    orig, _, _, archive, again, _ = built
    assert archive.read_bytes() == again.read_bytes(), "exporting the same entries twice gives the same bytes"
    with tarfile.open(archive, "r:gz") as tar:
        names = tar.getnames()
        manifest = json.loads(tar.extractfile(MANIFEST).read())
        assert {m.mtime for m in tar.getmembers()} == {0}
        first = tar.extractfile(names[1]).read()
    answered = {c["key"] for c in calls(orig) if c["status"] == "ok"}
    assert manifest["format"] == FORMAT and {e["key"] for e in manifest["entries"]} == answered
    assert names == [MANIFEST, *sorted(member_name(k) for k in answered)]  # manifest first, then in key order
    assert set(manifest["keys_per_rule"]) == {"pasbench_respond", "pasbench_judge", "pasbench_verify"}
    entry = manifest["entries"][0]
    assert hashlib.sha256(first).hexdigest() == entry["sha256"]
    assert first == Cache(orig / "cache" / "llm").path(entry["key"]).read_bytes(), "the cache's bytes, unchanged"


def test_rebuilds_from_the_released_cache_make_no_call_and_match_byte_for_byte(built):
    orig, r1, r2, archive, _, code_before = built
    with tarfile.open(archive, "r:gz") as tar:
        released = {e["key"] for e in json.loads(tar.extractfile(MANIFEST).read())["entries"]}
    for work in (r1, r2):  # the server was gone: every call was answered from the imported entries
        recs = calls(work)
        assert recs and all(c["cache_hit"] and c["status"] == "ok" for c in recs)
        assert {c["key"] for c in recs} == released
    files = [outputs(w) for w in (orig, r1, r2)]
    assert set(files[0]) == set(files[1]) == set(files[2])
    kinds = {Path(n).suffix for n in files[0]}
    assert {".pdf", ".png", ".csv", ".md", ".jsonl"} <= kinds
    assert all(f"figures/{r}.{ext}" in files[0] for r in REPORTS for ext in ("pdf", "png"))
    # In CI nothing changes the code under the test; in a shared working tree another commit may, and then the
    # sidecars rightly name two code versions: only then are `git` and `config_hash` left out too.
    code_changed = code_fingerprint() != code_before
    sidecars = 0
    for name, path in files[0].items():
        if name.endswith(".prov.json"):
            provs = [json.loads(f[name].read_text()) for f in files]
            same = [without_run(p) for p in provs]
            if code_changed:
                same = [{k: v for k, v in p.items() if k not in ("git", "config_hash")} for p in same]
            assert same[0] == same[1] == same[2], name
            assert provs[1][RUN_FIELD]["cwd"] != provs[2][RUN_FIELD]["cwd"]  # what differs lives under `run`
            sidecars += 1
        else:
            data = path.read_bytes()
            assert files[1][name].read_bytes() == data and files[2][name].read_bytes() == data, name
    assert sidecars >= 5


def test_pdf_has_no_creation_date(built):
    orig = built[0]
    pdf = (orig / "figures" / f"{REPORTS[0]}.pdf").read_bytes()
    assert pdf.startswith(b"%PDF") and b"/CreationDate" not in pdf


# ---- the archive on a hand-made cache ----------------------------------------------------------------------------

def _entry(key: str, text: str) -> dict:
    return {"key": key, "request": {"model": "fake-model"},
            "response": {"text": text, "finish_reason": "stop", "usage": {"prompt_tokens": 3, "completion_tokens": 1}}}


@pytest.fixture
def small(tmp_path):
    """A cache of 4 entries and two call logs naming 3 of them. Expected export, by hand: keys a, b (respond log:
    a answered live, b a cache hit, a failed call with key d, never cached) and c (judge log, also a again) ->
    3 distinct keys a, b, c; the 4th entry (e) no log names, so it stays out."""
    (tmp_path / "config").mkdir()
    raw = small_config("http://127.0.0.1:9/v1")
    raw["paths"] = {k: str(tmp_path / v) for k, v in raw["paths"].items()}
    (tmp_path / "config" / "c.yaml").write_text(yaml.safe_dump(raw))
    keys = {n: hashlib.sha256(n.encode()).hexdigest() for n in "abcde"}
    cache = Cache(tmp_path / "cache" / "llm")
    for n in "abce":
        cache.put(keys[n], _entry(keys[n], f"answer {n}"))
    logs = tmp_path / "logs"
    rec = lambda n, status="ok", hit=False: json.dumps({"key": keys[n], "status": status, "cache_hit": hit})
    (logs / "pasbench_respond").mkdir(parents=True)
    (logs / "pasbench_respond" / "m.calls.jsonl").write_text("\n".join([rec("a"), rec("b", hit=True),
                                                                        rec("d", "failed")]) + "\n")
    (logs / "pasbench_judge").mkdir()
    (logs / "pasbench_judge" / "m.calls.jsonl").write_text(rec("c") + "\n" + rec("a", hit=True) + "\n")
    return tmp_path, keys


def cli(capsys, *args: str) -> tuple[int, str]:
    """`python -m aura ...` in this process (the hand-made cases; the run above uses subprocesses): (rc, stderr)."""
    capsys.readouterr()
    rc = main(list(args))
    return rc, capsys.readouterr().err


def _export(tmp, capsys, out="out.tar.gz") -> Path:
    rc, err = cli(capsys, "cache", "export", "--configfile", str(tmp / "config" / "c.yaml"), "--out", str(tmp / out))
    assert rc == 0, err
    return tmp / out


def _fresh_config(tmp, name: str) -> str:
    raw = yaml.safe_load((tmp / "config" / "c.yaml").read_text())
    raw["paths"]["cache"] = str(tmp / name)
    (tmp / "config" / f"{name}.yaml").write_text(yaml.safe_dump(raw))
    return str(tmp / "config" / f"{name}.yaml")


def test_round_trip_restores_exactly_the_used_entries(small, capsys):
    tmp, keys = small
    archive = _export(tmp, capsys)
    with tarfile.open(archive, "r:gz") as tar:
        manifest = json.loads(tar.extractfile(MANIFEST).read())
    assert manifest["count"] == 3 and manifest["call_logs"] == 2
    assert manifest["keys_per_rule"] == {"pasbench_judge": 2, "pasbench_respond": 2}  # judge: c, a; respond: a, b
    rc, err = cli(capsys, "cache", "import", str(archive), "--configfile", _fresh_config(tmp, "fresh"))
    assert rc == 0 and "3 entries verified (sha256)" in err and "3 written, 0 already present" in err
    src, dst = Cache(tmp / "cache" / "llm"), Cache(tmp / "fresh")
    for n in "abc":
        assert dst.path(keys[n]).read_bytes() == src.path(keys[n]).read_bytes()
    assert not dst.path(keys["e"]).exists() and dst.get(keys["a"])["response"]["text"] == "answer a"
    rc, err = cli(capsys, "cache", "import", str(archive), "--configfile", _fresh_config(tmp, "fresh"))
    assert rc == 0 and "0 written, 3 already present" in err


def _rewrite(archive: Path, out: Path, change, append: tuple[str, bytes] | None = None) -> None:
    """A copy of the archive with `change(name, data) -> bytes | None` applied per member (None drops it) and
    one member appended."""
    with tarfile.open(archive, "r:gz") as src, tarfile.open(out, "w:gz") as dst:
        members = [(info, src.extractfile(info).read()) for info in src.getmembers()]
        if append:
            members.append((tarfile.TarInfo(append[0]), append[1]))
        for info, data in members:
            data = change(info.name, data)
            if data is not None:
                info.size = len(data)
                dst.addfile(info, io.BytesIO(data))


def _nothing_in(folder: Path) -> bool:
    return not folder.exists() or not any(p.is_file() for p in folder.rglob("*"))


@pytest.mark.parametrize("kind", ["edited", "missing", "unlisted"])
def test_a_bad_archive_is_refused_naming_the_member_and_nothing_is_unpacked(small, capsys, kind):
    tmp, keys = small
    archive, bad = _export(tmp, capsys), tmp / "bad.tar.gz"
    member = member_name(keys["e" if kind == "unlisted" else "b"])
    if kind == "edited":  # one answer changed, the manifest left as it was
        _rewrite(archive, bad, lambda n, d: d.replace(b"answer b", b"answer B") if n == member else d)
    elif kind == "missing":
        _rewrite(archive, bad, lambda n, d: None if n == member else d)
    else:  # a whole entry the manifest does not name, after the last listed one
        _rewrite(archive, bad, lambda n, d: d, (member, Cache(tmp / "cache" / "llm").path(keys["e"]).read_bytes()))
    rc, err = cli(capsys, "cache", "import", str(bad), "--configfile", _fresh_config(tmp, "fresh"))
    lines = err.strip().splitlines()
    assert rc == 2 and len(lines) == 1, lines
    assert lines[0].startswith("error: cache import:") and f"member {member}" in lines[0], lines
    assert _nothing_in(tmp / "fresh")


def test_a_damaged_archive_and_a_differing_cache_entry_stop_with_one_line(small, capsys):
    tmp, keys = small
    archive = _export(tmp, capsys)
    cut = tmp / "cut.tar.gz"
    cut.write_bytes(archive.read_bytes()[: len(archive.read_bytes()) // 2])
    rc, err = cli(capsys, "cache", "import", str(cut), "--configfile", _fresh_config(tmp, "fresh"))
    assert rc == 2 and len(err.strip().splitlines()) == 1 and str(cut) in err and _nothing_in(tmp / "fresh")
    # the target cache already holds another answer for key c: refused, nothing written; --replace takes the archive's
    Cache(tmp / "mine").put(keys["c"], _entry(keys["c"], "my own answer"))
    conf = _fresh_config(tmp, "mine")
    rc, err = cli(capsys, "cache", "import", str(archive), "--configfile", conf)
    assert rc == 2 and member_name(keys["c"]) in err and "--replace" in err
    assert not Cache(tmp / "mine").path(keys["a"]).exists()
    assert Cache(tmp / "mine").get(keys["c"])["response"]["text"] == "my own answer"
    rc, err = cli(capsys, "cache", "import", str(archive), "--configfile", conf, "--replace")
    assert rc == 0 and Cache(tmp / "mine").get(keys["c"])["response"]["text"] == "answer c"


def test_export_stops_when_a_logged_entry_is_gone(small, capsys):
    tmp, keys = small
    Cache(tmp / "cache" / "llm").path(keys["b"]).unlink()
    rc, err = cli(capsys, "cache", "export", "--configfile", str(tmp / "config" / "c.yaml"), "--out", str(tmp / "x.tar.gz"))
    assert rc == 2 and len(err.strip().splitlines()) == 1
    assert keys["b"] in err and "pasbench_respond/m.calls.jsonl:2" in err  # b is the respond log's 2nd record
    assert not (tmp / "x.tar.gz").exists() and not list(tmp.glob(".x.tar.gz.*"))
