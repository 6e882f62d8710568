"""Tests for aura.fetch against a real HTTP server on 127.0.0.1 (no network, no mocks)."""

from __future__ import annotations

import hashlib
import io
import json
import re
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest
import yaml

from aura.cli import main
from aura.config import read_raw
from aura.fetch import MARKER, ChecksumError, FetchError, fetch_archive
from aura.families.aura.data.rjudge import load_rjudge
from aura.families.aura.data.seed_counts import SeedCountError, check_seed_counts
from aura.families.aura.data.seed_source import ensure_seed_dir, seed_download, seed_folder
from archive_server import http, tar_gz  # noqa: F401 - http: the local archive server fixture
from conftest import REPO, base_config
from rjudge_fixture import INJECTION, PAPER_COUNTS, UNINTENDED, paper_shaped_files, write_paper_shaped

TOP = "R-Judge-abc123"
RECORD = {
    "id": 1, "scenario": "s", "profile": "p", "goal": "g",
    "contents": [[{"role": "user", "content": "hi"},
                  {"role": "agent", "thought": "t", "action": "a"}]],
    "label": 1, "risk_description": "r", "attack_type": "unintended",
}


def _zip(path: Path, files: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in files.items():
            zf.writestr(name, data)
    return path


def _files(records=(RECORD,)) -> dict[str, bytes]:
    return {f"{TOP}/data/IoT/x.json": json.dumps(list(records)).encode(),
            f"{TOP}/README.md": b"readme\n"}


@pytest.fixture
def work(tmp_path):
    d = tmp_path / "work"
    d.mkdir()
    return d


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_first_fetch_records_lock_and_extracts_subdir(http, work):
    arc = tar_gz(http.root / "abc123.tar.gz", _files())
    url, dest, lock = http.url("abc123.tar.gz"), work / "rjudge", work / "rjudge.lock.json"

    out = fetch_archive(url, dest, lock, subdir="data", timeout=5)

    assert out == dest
    assert json.loads((dest / "IoT" / "x.json").read_text()) == [RECORD]
    assert not (dest / "README.md").exists()  # only the subdir was installed
    entry = json.loads(lock.read_text())
    assert entry["url"] == url and entry["sha256"] == _sha(arc) and entry["downloaded_at"]
    assert json.loads((dest / MARKER).read_text()) == {"url": url, "sha256": _sha(arc)}
    # The loader reads the fetched folder (the marker at the root is ignored).
    recs = load_rjudge(dest)
    assert [r.seed_id for r in recs] == ["IoT/x/1"]
    # No temp files or folders are left behind.
    assert sorted(p.name for p in work.iterdir()) == ["rjudge", "rjudge.lock.json"]


def test_second_fetch_is_idempotent(http, work):
    tar_gz(http.root / "abc123.tar.gz", _files())
    url, dest, lock = http.url("abc123.tar.gz"), work / "rjudge", work / "lock.json"
    fetch_archive(url, dest, lock, subdir="data", timeout=5)
    lock_before = lock.read_text()
    assert len(http.requests) == 1

    assert fetch_archive(url, dest, lock, subdir="data", timeout=5) == dest
    assert len(http.requests) == 1  # no second download
    assert lock.read_text() == lock_before


def test_refetch_after_dest_removed_verifies_lock(http, work):
    tar_gz(http.root / "abc123.tar.gz", _files())
    url, dest, lock = http.url("abc123.tar.gz"), work / "rjudge", work / "lock.json"
    fetch_archive(url, dest, lock, subdir="data", timeout=5)
    (dest / MARKER).unlink()  # marker gone: must download again, and the checksum still matches
    fetch_archive(url, dest, lock, subdir="data", timeout=5)
    assert len(http.requests) == 2
    assert (dest / "IoT" / "x.json").is_file()


def test_changed_archive_raises_checksum_error_and_keeps_dest(http, work):
    arc = tar_gz(http.root / "abc123.tar.gz", _files())
    url, dest, lock = http.url("abc123.tar.gz"), work / "rjudge", work / "lock.json"
    fetch_archive(url, dest, lock, subdir="data", timeout=5)
    old_sha = _sha(arc)
    old_json = (dest / "IoT" / "x.json").read_bytes()
    old_lock = lock.read_text()

    changed = dict(RECORD, id=2, label=0)
    tar_gz(arc, _files([changed]))
    (dest / MARKER).unlink()  # force a download
    with pytest.raises(ChecksumError) as ei:
        fetch_archive(url, dest, lock, subdir="data", timeout=5)
    msg = str(ei.value)
    assert url in msg and old_sha in msg and _sha(arc) in msg
    assert isinstance(ei.value, ValueError)
    assert (ei.value.expected, ei.value.got) == (old_sha, _sha(arc))
    assert (dest / "IoT" / "x.json").read_bytes() == old_json
    assert lock.read_text() == old_lock
    assert sorted(p.name for p in work.iterdir()) == ["lock.json", "rjudge"]


def test_path_traversal_member_rejected(http, work):
    files = _files()
    files["../evil"] = b"pwned"
    tar_gz(http.root / "bad.tar.gz", files)
    dest, lock = work / "rjudge", work / "lock.json"
    with pytest.raises(ValueError, match=r"\.\./evil"):
        fetch_archive(http.url("bad.tar.gz"), dest, lock, subdir="data", timeout=5)
    assert not dest.exists()
    assert not (work.parent / "evil").exists()
    assert not lock.exists()  # a rejected archive is not pinned
    assert list(work.iterdir()) == []


@pytest.mark.parametrize("linkname", ["/etc/passwd", "../../../../outside", "../../README.md"])
def test_symlink_pointing_outside_rejected(http, work, linkname):
    # The last one stays inside the archive but leaves the installed subdir.
    path = http.root / "link.tar.gz"
    with tarfile.open(path, "w:gz") as tf:
        info = tarfile.TarInfo(f"{TOP}/data/IoT/link")
        info.type = tarfile.SYMTYPE
        info.linkname = linkname
        tf.addfile(info)
        readme = tarfile.TarInfo(f"{TOP}/README.md")
        tf.addfile(readme, io.BytesIO(b""))
    with pytest.raises(ValueError, match="IoT/link"):
        fetch_archive(http.url("link.tar.gz"), work / "rjudge", work / "lock.json",
                      subdir="data", timeout=5)
    assert list(work.iterdir()) == []


def test_absolute_member_rejected_in_zip(http, work):
    _zip(http.root / "abs.zip", {"/tmp/evil.json": b"[]"})
    with pytest.raises(ValueError, match="evil.json"):
        fetch_archive(http.url("abs.zip"), work / "rjudge", work / "lock.json", timeout=5)


def test_http_404_is_a_clear_error(http, work):
    url = http.url("missing.tar.gz")
    with pytest.raises(FetchError) as ei:
        fetch_archive(url, work / "rjudge", work / "lock.json", subdir="data", timeout=5)
    assert "404" in str(ei.value) and url in str(ei.value)
    assert list(work.iterdir()) == []


def test_zip_archive_works(http, work):
    arc = _zip(http.root / "abc123.zip", _files())
    url, dest, lock = http.url("abc123.zip"), work / "rjudge", work / "lock.json"
    fetch_archive(url, dest, lock, subdir="data", timeout=5)
    assert json.loads((dest / "IoT" / "x.json").read_text()) == [RECORD]
    assert json.loads(lock.read_text())["sha256"] == _sha(arc)


def test_subdir_at_root_and_missing_subdir(http, work):
    tar_gz(http.root / "flat.tar.gz", {"data/IoT/x.json": b"[]", "other.txt": b"x"})
    dest = work / "rjudge"
    fetch_archive(http.url("flat.tar.gz"), dest, work / "lock.json", subdir="data", timeout=5)
    assert (dest / "IoT" / "x.json").read_bytes() == b"[]"

    tar_gz(http.root / "abc123.tar.gz", _files())
    with pytest.raises(ValueError, match="nope"):
        fetch_archive(http.url("abc123.tar.gz"), work / "other", work / "lock.json",
                      subdir="nope", timeout=5)


def test_lock_keeps_entries_for_other_urls(http, work):
    tar_gz(http.root / "a.tar.gz", _files())
    _zip(http.root / "b.zip", _files())
    lock = work / "lock.json"
    fetch_archive(http.url("a.tar.gz"), work / "a", lock, subdir="data", timeout=5)
    fetch_archive(http.url("b.zip"), work / "b", lock, subdir="data", timeout=5)
    entries = json.loads(lock.read_text())
    assert [e["url"] for e in entries] == [http.url("a.tar.gz"), http.url("b.zip")]


def test_new_url_replaces_existing_dest(http, work):
    tar_gz(http.root / "v1.tar.gz", _files())
    tar_gz(http.root / "v2.tar.gz", _files([dict(RECORD, id=7)]))
    dest, lock = work / "rjudge", work / "lock.json"
    fetch_archive(http.url("v1.tar.gz"), dest, lock, subdir="data", timeout=5)
    fetch_archive(http.url("v2.tar.gz"), dest, lock, subdir="data", timeout=5)
    assert json.loads((dest / "IoT" / "x.json").read_text())[0]["id"] == 7
    assert sorted(p.name for p in work.iterdir()) == ["lock.json", "rjudge"]


def test_ensure_seed_dir_prefers_local_path(http, work, tmp_path):
    local = tmp_path / "local_seeds"
    (local / "IoT").mkdir(parents=True)
    url = http.url("abc123.tar.gz")  # not even served: must not be requested
    got = ensure_seed_dir(str(local), url, work / "rjudge", work / "lock.json", "data")
    assert got == local
    assert http.requests == []


def test_ensure_seed_dir_falls_back_to_url(http, work, tmp_path):
    tar_gz(http.root / "abc123.tar.gz", _files())
    dest = work / "rjudge"
    got = ensure_seed_dir(str(tmp_path / "missing"), http.url("abc123.tar.gz"), dest,
                          work / "lock.json", "data")
    assert got == dest and (dest / "IoT" / "x.json").is_file()


def test_ensure_seed_dir_without_source_errors(work, tmp_path):
    with pytest.raises(ValueError, match="no R-Judge seed source"):
        ensure_seed_dir(None, None, work / "rjudge", work / "lock.json", None)
    with pytest.raises(ValueError, match="does not exist"):
        ensure_seed_dir(str(tmp_path / "missing"), None, work / "rjudge", work / "lock.json", None)


# --- the paper's seed source: pinned archive + counts check (config/paper.yaml, rjudge10.yaml) ----

PAPER_RAW = read_raw(REPO / "config" / "paper.yaml")
PAPER = PAPER_RAW["aura"]  # the AURA family's section: its seed source and counts
DEFEND_TOP = "DEFEND-70067a5bb5c1be0ecf346fc22751de73b526370f"  # how GitHub names an archive's top folder


def test_paper_and_rjudge10_share_a_pinned_source_and_the_paper_counts():
    r10_raw = read_raw(REPO / "config" / "rjudge10.yaml")
    r10 = r10_raw["aura"]
    assert PAPER["seed_download"] == r10["seed_download"] and PAPER["seed_counts"] == r10["seed_counts"]
    assert re.search(r"/archive/[0-9a-f]{40}\.tar\.gz$", PAPER["seed_download"]["url"])  # a commit, not a branch
    # the paper: 157 = 48 + 39 + 30 + 23 + 17 (by domain) = 101 + 56 (unsafe + safe), of 571 records
    assert PAPER["seed_counts"] == PAPER_COUNTS
    assert sum(PAPER_COUNTS["unintended_by_domain"].values()) == 157 == sum(PAPER_COUNTS["unintended_by_label"].values())
    for raw, name in ((PAPER_RAW, "paper.yaml"), (r10_raw, "rjudge10.yaml")):
        assert raw["paths"]["seeds"] == raw["aura"]["seed_download"]["dest"] == seed_folder(raw), name
        assert seed_download(raw) == raw["aura"]["seed_download"], name
        assert "shared/datasets" not in (REPO / "config" / name).read_text(), name  # no config reads the developers' copy beside the repo


def test_seed_counts_name_every_difference(tmp_path):
    # Finance loses one unsafe unintended record (11 -> 10), Web gains one injection record (83 -> 84):
    # records stay 571 - 1 + 1 = 571, unintended 156, Finance 16, unsafe 100; safe stays 56.
    root = write_paper_shaped(tmp_path / "seeds", unintended={**UNINTENDED, "Finance": (10, 6)},
                              injection={**INJECTION, "Web": 84})
    with pytest.raises(SeedCountError) as ei:
        check_seed_counts(load_rjudge(root), PAPER_COUNTS, root)
    msg = str(ei.value)
    assert "\n" not in msg and str(root) in msg
    assert "unintended 156 (expected 157)" in msg
    assert "unintended_by_domain.Finance 16 (expected 17)" in msg
    assert "unintended_by_label.unsafe 100 (expected 101)" in msg
    assert "records" not in msg and ".safe" not in msg and "Web" not in msg
    check_seed_counts(load_rjudge(write_paper_shaped(tmp_path / "ok")), PAPER_COUNTS, "ok")  # no error


def _stage_config(tmp_path, **aura) -> Path:
    """A config whose `aura:` section holds `aura` (seed_download, seed_counts) beside its roles."""
    raw = base_config("http://127.0.0.1:9/v1", tmp_path / "cache")  # no model is called
    raw["models"].update({n: dict(raw["models"]["m"]) for n in ("m2", "m3")})  # a panel of three distinct judges
    raw["aura"]["roles"].update(judges=["m", "m2", "m3"], reviewers=["m", "m2", "m3"])
    raw["aura"].update(aura)
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def _defend_archive(http, name, **kw) -> Path:
    """The pinned archive's layout: <top>/data/R-Judge/<Domain>/{benign,harmful}.json."""
    files = {f"{DEFEND_TOP}/data/R-Judge/{rel}": data for rel, data in paper_shaped_files(**kw).items()}
    files[f"{DEFEND_TOP}/README.md"] = b"vendored\n"
    return tar_gz(http.root / name, files)


def test_fetch_seeds_checks_the_counts_then_select_seeds_keeps_157(http, tmp_path):
    arc = _defend_archive(http, "pin.tar.gz")
    dl = {**PAPER["seed_download"], "url": http.url("pin.tar.gz"), "dest": str(tmp_path / "rjudge"),
          "lock": str(tmp_path / "rjudge.lock.json")}
    cfg = _stage_config(tmp_path, seed_download=dl, seed_counts=PAPER["seed_counts"])
    assert main(["fetch-seeds", "--configfile", str(cfg)]) == 0
    assert json.loads((tmp_path / "rjudge.lock.json").read_text())["sha256"] == _sha(arc)  # recorded
    assert (tmp_path / "rjudge" / MARKER).is_file()
    out = tmp_path / "seeds.jsonl"
    assert main(["select-seeds", "--configfile", str(cfg), "--in", f"seeds_dir={tmp_path / 'rjudge'}",
                 "--out", f"seeds={out}"]) == 0
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert len(rows) == 157 and rows[0]["seed_id"] == "Application/benign/0"


def test_fetch_seeds_refuses_an_archive_without_the_paper_counts(http, tmp_path, capsys):
    # one safe Finance seed missing: safe 56 - 1 = 55, Finance 17 - 1 = 16, unintended 156, records 570
    _defend_archive(http, "pin.tar.gz", unintended={**UNINTENDED, "Finance": (11, 5)})
    dl = {**PAPER["seed_download"], "url": http.url("pin.tar.gz"), "dest": str(tmp_path / "rjudge"),
          "lock": str(tmp_path / "rjudge.lock.json")}
    cfg = _stage_config(tmp_path, seed_download=dl, seed_counts=PAPER["seed_counts"])
    assert main(["fetch-seeds", "--configfile", str(cfg)]) == 2  # a user's mistake (UserError)
    msg = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error: ")]
    assert len(msg) == 1 and msg[0].startswith("error: fetch-seeds: ")
    msg = msg[0]
    assert "records 570 (expected 571)" in msg and "unintended_by_label.safe 55 (expected 56)" in msg
    assert not (tmp_path / "rjudge").exists() and not (tmp_path / "rjudge.lock.json").exists()  # nothing kept
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temp left behind


def test_select_seeds_checks_a_users_own_copy(tmp_path, capsys):
    # paths.seeds at a copy with one Program injection record too few: records 571 - 1 = 570
    copy = write_paper_shaped(tmp_path / "my_rjudge", injection={**INJECTION, "Program": 82})
    raw = {"seed_download": {**PAPER["seed_download"], "enabled": False}, "seed_counts": PAPER["seed_counts"]}
    cfg = _stage_config(tmp_path, **raw)
    assert main(["select-seeds", "--configfile", str(cfg), "--in", f"seeds_dir={copy}",
                 "--out", f"seeds={tmp_path / 'seeds.jsonl'}"]) == 2
    assert (f"error: select-seeds: {copy}: not the R-Judge release the config expects (aura.seed_counts): records 570 "
            "(expected 571)") in capsys.readouterr().err.splitlines()
    assert not (tmp_path / "seeds.jsonl").exists()


def test_paper_dag_downloads_first_with_nothing_beside_the_repo(tmp_path):
    """`snakemake -n all --configfile config/paper.yaml`: the DAG builds from the pinned download
    alone (every path under tmp_path, so no local download or output is seen), fetch_seeds first."""
    raw = read_raw(REPO / "config" / "paper.yaml")
    raw["paths"].update({k: str(tmp_path / k) for k in ("interim", "processed", "results", "figures", "cache", "logs")})
    raw["aura"]["seed_download"].update(dest=str(tmp_path / "rjudge"), lock=str(tmp_path / "rjudge.lock.json"))
    raw["paths"]["seeds"] = raw["aura"]["seed_download"]["dest"]
    raw["families"] = ["aura"]  # the R-Judge download's DAG (another family's jobs may come first otherwise)
    cfg = tmp_path / "paper.yaml"
    cfg.write_text(yaml.safe_dump(raw))
    out = subprocess.run([sys.executable, "-m", "snakemake", "-n", "all", "--configfile", str(cfg)], cwd=REPO,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    text = out.stdout + out.stderr
    jobs = re.findall(r"^(?:local)?rule (\w+):$", text, re.MULTILINE)
    assert jobs[0] == "fetch_seeds" and jobs.count("fetch_seeds") == 1 and "select_seeds" in jobs


def test_a_users_copy_replaces_the_download_in_the_dag(tmp_path):
    """A config that extends paper.yaml with `paths.seeds: <copy>` and `aura.seed_download: {enabled: false}` plans no
    download: select_seeds reads the copy (and checks its counts when it runs, see above)."""
    copy = write_paper_shaped(tmp_path / "my_rjudge")
    paths = {k: str(tmp_path / k) for k in ("interim", "processed", "results", "figures", "cache", "logs")}
    cfg = tmp_path / "mine.yaml"
    cfg.write_text(yaml.safe_dump({"extends": str(REPO / "config" / "paper.yaml"), "aura": {"seed_download": {"enabled": False}},
                                   "paths": {**paths, "seeds": str(copy)}, "families": ["aura"]}))
    out = subprocess.run([sys.executable, "-m", "snakemake", "-n", "all", "--configfile", str(cfg)], cwd=REPO,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    jobs = re.findall(r"^(?:local)?rule (\w+):$", out.stdout + out.stderr, re.MULTILINE)
    assert "fetch_seeds" not in jobs and jobs[0] == "select_seeds"
    assert f"input: {copy}" in out.stdout + out.stderr  # select_seeds' input is the copy itself
