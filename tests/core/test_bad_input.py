"""Bad input files through the real CLI in a subprocess: every mistake is ONE line on stderr that
names the file (and the record or row), the exit status is non-zero, and nothing is written at
the output path. R-Judge-shaped seed folders (select-seeds) and human-label CSVs (reliability)."""
from __future__ import annotations

import copy
import json
import os
import subprocess
import sys

import pytest
import yaml

import scripted
from aura.cli import main
from aura.config import ConfigError
from aura.families.aura.settings import check_case_study_seed
from conftest import REPO, base_config


def aura(tmp_path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "aura", *args], cwd=tmp_path, capture_output=True, text=True,
                          timeout=120, env={**os.environ, "PYTHONPATH": str(REPO / "src")})


def config_file(tmp_path, **stats) -> str:
    raw = base_config("http://127.0.0.1:9/v1", tmp_path / "cache")  # no stage here calls a model
    if stats:
        raw["aura"]["stats"] = stats
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(raw))
    return str(path)


def one_error_line(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode != 0
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("error: ") and "Traceback" not in proc.stderr
    return lines[0]


def select_seeds(tmp_path, seeds_dir, config=None) -> tuple[subprocess.CompletedProcess, list]:
    out = tmp_path / "out" / "seeds.jsonl"
    proc = aura(tmp_path, "select-seeds", "--configfile", config or config_file(tmp_path),
                "--in", f"seeds_dir={seeds_dir}", "--out", f"seeds={out}")
    written = sorted(p.name for p in out.parent.glob("*")) if out.parent.exists() else []
    return proc, written


def seed_file(tmp_path, text: str | bytes, name: str = "x.json"):
    folder = tmp_path / "seeds" / "IoT"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    (path.write_bytes if isinstance(text, bytes) else path.write_text)(text)
    return tmp_path / "seeds", path


def record(**changes) -> dict:
    rec = copy.deepcopy(scripted.SEED)
    rec.update(changes)
    return rec


@pytest.mark.parametrize("contents, message", [
    ([], "contents is empty"),
    ([[{"role": "user", "content": "hi"}], []], r"turn\(s\) \[1\] of contents are empty"),
])
def test_empty_contents_or_turn_is_an_error(tmp_path, contents, message):
    seeds, path = seed_file(tmp_path, json.dumps([record(), record(id="t-2", contents=contents)]))
    proc, written = select_seeds(tmp_path, seeds)
    line = one_error_line(proc)
    assert str(path) in line and "id='t-2'" in line
    assert __import__("re").search(message, line), line
    assert written == []


def test_invalid_utf8_says_so(tmp_path):
    good = json.dumps([record()]).encode()
    seeds, path = seed_file(tmp_path, good[:40] + b"\xff" + good[40:])  # 0xff never occurs in UTF-8
    proc, written = select_seeds(tmp_path, seeds)
    line = one_error_line(proc)
    assert str(path) in line and "not valid UTF-8" in line and "offset 40" in line
    assert "not valid JSON" not in line and written == []


def test_duplicate_keys_inside_a_record_are_an_error(tmp_path):
    text = json.dumps([record(id="t-dup")])
    # "label" twice at the top of the record, "content" twice in the first message
    text = text.replace('"label": 1', '"label": 0, "label": 1')
    text = text.replace('"role": "user", "content":', '"role": "user", "content": "first", "content":', 1)
    seeds, path = seed_file(tmp_path, text)
    proc, written = select_seeds(tmp_path, seeds)
    line = one_error_line(proc)
    assert str(path) in line and "id='t-dup'" in line
    assert "duplicate key(s) label, contents.0.0.content" in line and written == []


def test_unreadable_file_names_the_file(tmp_path):
    seeds, path = seed_file(tmp_path, json.dumps([record()]))
    (path.parent / "broken.json").mkdir()  # matched by *.json, but cannot be read as a file
    proc, written = select_seeds(tmp_path, seeds)
    line = one_error_line(proc)
    assert str(path.parent / "broken.json") in line and "cannot read the file" in line and written == []


def test_missing_seed_folder_is_one_line(tmp_path):
    proc, written = select_seeds(tmp_path, tmp_path / "nowhere")
    line = one_error_line(proc)
    assert str(tmp_path / "nowhere") in line and "does not exist" in line and written == []


def test_a_malformed_record_is_one_line_not_a_traceback(tmp_path):
    seeds, path = seed_file(tmp_path, json.dumps([record(id=7, label=2)]))
    proc, written = select_seeds(tmp_path, seeds)
    line = one_error_line(proc)
    assert str(path) in line and "id=7" in line and "label" in line and written == []


def test_a_cut_off_input_file_is_one_line_naming_the_file_and_line(tmp_path):
    # a stage's input JSONL cut mid-record (a copied or hand-edited file): one line, nothing written
    dataset = tmp_path / "dataset.jsonl"
    dataset.write_text('{"item_id": "i1", "seed_id": "s1"}\n{"item_id": "i2", "se')
    out = tmp_path / "out" / "sample.jsonl"
    proc = aura(tmp_path, "format-sample", "--configfile", config_file(tmp_path), "--in", f"dataset={dataset}",
                "--out", f"sample={out}")
    line = one_error_line(proc)
    assert f"{dataset}:2: invalid JSON line" in line and not out.exists()


def test_unknown_case_study_seed_names_the_id(tmp_path):
    seeds, _ = seed_file(tmp_path, json.dumps([record()]))
    proc, written = select_seeds(tmp_path, seeds, config_file(tmp_path, case_study_seed="IoT/x/nope"))
    line = one_error_line(proc)
    assert "aura.stats.case_study_seed" in line and "'IoT/x/nope'" in line and written == []
    assert "is not a seed id of the source" in line
    # the seed this folder holds ("<Domain>/<file stem>/<id>") is accepted; one the cap left out is named as such
    check_case_study_seed({"aura": {"stats": {"case_study_seed": "IoT/x/t-1"}}}, ["IoT/x/t-1"])
    check_case_study_seed({"aura": {"stats": {"case_study_seed": None}}}, [])
    with pytest.raises(ConfigError, match=r"'IoT/x/t-2' is not among the 1 seeds selected \(aura.construct.max_seeds\)"):
        check_case_study_seed({"aura": {"stats": {"case_study_seed": "IoT/x/t-2"}}}, ["IoT/x/t-1"],
                              ["IoT/x/t-1", "IoT/x/t-2"])


# --- human-label files (reliability stage) ------------------------------------------------------
PANEL_ROW = {"item_id": "u1", "model": "m", "rollout_status": "ok", "detection": "D0", "action_type": "A0",
             "safety": "Safe", "detection_votes": {"m": "D0", "jb": "D0", "jc": "D0"},
             "action_type_votes": {"m": "A0", "jb": "A0", "jc": "A0"},
             "safety_votes": {"m": "Safe", "jb": "Safe", "jc": "Safe"}}
HEADER = "model,item_id,axis,annotator,label\n"


def reliability_args(tmp_path, labels: str | bytes) -> list[str]:
    panel, human, out = tmp_path / "panel.jsonl", tmp_path / "human.csv", tmp_path / "out"
    panel.write_text(json.dumps(PANEL_ROW) + "\n")
    (human.write_bytes if isinstance(labels, bytes) else human.write_text)(labels)
    return ["reliability", "--configfile", config_file(tmp_path), "--in", f"panel_0={panel}",
            "--in", f"human_labels={human}", *[x for n in ("judge_reliability", "table3", "judge_accuracy")
                                               for x in ("--out", f"{n}={out}/{n}.csv")]]


def test_bad_human_labels_through_the_real_cli(tmp_path):
    proc = aura(tmp_path, *reliability_args(tmp_path, (HEADER + "m,u1,safety,h1,Saf\xe9\n").encode("latin-1")))
    line = one_error_line(proc)
    # offset: the 35-byte header line, then "m,u1,safety,h1,Saf" (18 bytes) before the latin-1 e-acute
    assert str(tmp_path / "human.csv") in line and "not valid UTF-8" in line and "offset 53" in line, line
    assert not (tmp_path / "out").exists()


def test_good_human_labels_are_read(tmp_path, capsys):
    assert main(reliability_args(tmp_path, HEADER + "m,u1,safety,h1,Safe\nm,u1,safety,h2,Safe\n")) == 0
    assert {p.name for p in (tmp_path / "out").glob("*.csv")} == {"judge_reliability.csv", "table3.csv",
                                                                   "judge_accuracy.csv"}


# The same main() the subprocess runs, in this process (each case would otherwise cost a Python start).
@pytest.mark.parametrize("labels, expected", [
    ("model,item_id,axis,annotator,label,label\nm,u1,safety,h1,Safe,Safe\n", "['label'] given twice"),
    (HEADER + "m,u1,safety,h1,Safe\nm,,safety,h2,Safe\n", "row 3 (item_id ''): empty item_id"),
    (HEADER + "m,u1,safety,h1,Safe\nm,u2,safety,h1,Maybe\n", "row 3 (item_id 'u2'): label 'Maybe'"),
    (HEADER + "m,u1,safety,h1,Safe\nm,u1,safety,h1,Unsafe\n", "row 3: annotator 'h1' labels item_id 'u1'"),
    (HEADER + 'm,u1,safety,"h1,Safe\n', "cannot read human labels"),
    ("", "cannot read human labels"),
])
def test_bad_human_labels_are_one_line(tmp_path, capsys, labels, expected):
    assert main(reliability_args(tmp_path, labels)) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: reliability: "), err
    assert str(tmp_path / "human.csv") in err[0] and expected in err[0], err[0]
    assert not (tmp_path / "out").exists()
