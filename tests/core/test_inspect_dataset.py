"""The Inspect tasks' one export reader (aura.inspect_dataset): an export folder, a config's folder, one Parquet
file (its config told by its columns), the workflow's JSONL file; every wrong input one line."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from aura.io import write_jsonl

pytest.importorskip("inspect_ai")
import pandas as pd  # noqa: E402
from inspect_ai._util.error import PrerequisiteError  # noqa: E402

from aura.inspect_dataset import ExportSpec, read_export  # noqa: E402

SPEC = ExportSpec("fam", {"fam_text": ("item_id", "log"), "fam_image": ("item_id", "images")},
                  workflow_file="items.jsonl")
TEXT = [{"item_id": "t1", "log": "a", "extra_json": '{"k": [1]}'}, {"item_id": "t2", "log": None, "extra_json": None}]
IMAGE = [{"item_id": "i1", "images": [{"bytes": b"\x89PNG", "path": "x.png"}]}]


def export(root):
    for config, rows in (("fam_text", TEXT), ("fam_image", IMAGE)):
        (root / config).mkdir(parents=True)
        pd.DataFrame(rows).to_parquet(root / config / "test.parquet")
    return root


def one_line(e) -> str:
    text = str(e.value)
    assert "\n" not in text
    return text


def test_an_export_folder_a_config_folder_a_file_and_the_workflow_file(tmp_path):
    root = export(tmp_path / "export")
    parts = read_export(root, SPEC)
    assert [(p.config, [r["item_id"] for r in p.rows]) for p in parts] == [("fam_text", ["t1", "t2"]),
                                                                          ("fam_image", ["i1"])]
    text = parts[0].rows
    assert text[0]["extra_json"] == {"k": [1]} and text[1]["log"] is None  # the export's reader: JSON decoded
    assert parts[1].rows[0]["images"] == [{"bytes": b"\x89PNG", "path": "x.png"}]
    (part,) = read_export(root / "fam_image", SPEC)
    assert (part.config, part.source) == ("fam_image", str(root / "fam_image" / "test.parquet"))
    moved = tmp_path / "elsewhere.parquet"
    (root / "fam_image" / "test.parquet").rename(moved)
    assert read_export(moved, SPEC)[0].config == "fam_image"  # named by its columns
    write_jsonl(tmp_path / "run" / "items.jsonl", [{"item_id": "w1"}])
    for given in (tmp_path / "run", tmp_path / "run" / "items.jsonl"):
        (part,) = read_export(given, SPEC)
        assert (part.config, part.rows) == (None, [{"item_id": "w1"}])


def test_every_wrong_input_is_one_line(tmp_path):
    root = export(tmp_path / "export")
    with pytest.raises(PrerequisiteError) as e:
        read_export(root, SPEC, split="dev")
    assert one_line(e).startswith(f"data={root}: no fam_text/dev.parquet or fam_image/dev.parquet or dev.parquet or "
                                  "items.jsonl there")
    other = tmp_path / "other.parquet"
    pd.DataFrame([{"case_id": "c1", "case_json": "{}"}]).to_parquet(other)
    with pytest.raises(PrerequisiteError) as e:
        read_export(other, SPEC)
    assert one_line(e) == f"{other}: not a split of fam's export configs (fam_text, fam_image): no column item_id, log"
    binary = tmp_path / "items.jsonl"  # a Parquet file under the workflow's name: was a UnicodeDecodeError traceback
    binary.write_bytes((root / "fam_text" / "test.parquet").read_bytes())
    with pytest.raises(PrerequisiteError) as e:
        read_export(binary, SPEC)
    assert one_line(e).startswith(f"{binary}: cannot read it as items.jsonl (one JSON object a line): "
                                  "UnicodeDecodeError")
    broken = tmp_path / "broken.parquet"
    broken.write_text("not parquet")
    with pytest.raises(PrerequisiteError) as e:
        read_export(broken, SPEC)
    assert one_line(e).startswith(f"{broken}: cannot read it as Parquet: ")
    (tmp_path / "t.csv").write_text("item_id\n")
    with pytest.raises(PrerequisiteError) as e:
        read_export(tmp_path / "t.csv", SPEC)
    assert one_line(e) == f"data={tmp_path / 't.csv'}: not a .parquet file of the export or the workflow's items.jsonl"
    with pytest.raises(PrerequisiteError) as e:
        read_export(tmp_path / "nowhere", SPEC)
    assert one_line(e).startswith(f"data={tmp_path / 'nowhere'}: no such file or folder")


def test_a_hub_id_goes_to_datasets_and_an_unknown_one_is_one_line(tmp_path):
    """No local path of that name: `datasets.load_dataset` (offline here: it finds nothing), one line."""
    code = ("import sys\nfrom aura.inspect_dataset import ExportSpec, read_export\n"
            "try:\n    read_export('nobody-aura-test/no-such-dataset', ExportSpec('fam', {'fam_text': ('item_id',)}))\n"
            "except Exception as exc:\n    print(type(exc).__name__, str(exc))\n")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.startswith("TaskInputError data=nobody-aura-test/no-such-dataset: no such file or folder, and "
                                 "no fam config of a Hugging Face dataset of that id (fam_text: "), out.stdout
    assert out.stdout.count("\n") == 1


def test_the_hub_branch_reads_what_the_local_reader_reads(tmp_path):
    """`datasets.load_dataset` on an export folder with its card's configs (what a Hub dataset id resolves to),
    through the Hub branch: the same rows as the folder read locally. Run offline, its cache under tmp_path."""
    root = export(tmp_path / "export")
    (root / "README.md").write_text("---\nconfigs:\n" + "".join(
        f"- config_name: {c}\n  data_files:\n  - split: test\n    path: {c}/test.parquet\n" for c in SPEC.configs)
        + "---\n")
    code = ("import json, sys\nfrom aura.inspect_dataset import ExportSpec, _hub, read_export\n"
            f"spec = ExportSpec('fam', {SPEC.configs!r}, workflow_file='items.jsonl')\n"
            "hub, local = _hub(sys.argv[1], spec, 'test'), read_export(sys.argv[1], spec)\n"
            "print(json.dumps([[p.config, p.source] for p in hub]))\n"
            "assert [(p.config, p.rows) for p in hub] == [(p.config, p.rows) for p in local]\n")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")}
    out = subprocess.run([sys.executable, "-c", code, str(root)], env=env, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert json.loads(out.stdout) == [[c, f"{root} ({c}, test)"] for c in ("fam_text", "fam_image")]
