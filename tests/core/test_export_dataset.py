"""`python -m aura export-dataset` on a run the test builds (no model call): the construction fixture's stage
outputs with real provenance sidecars, finalize, and the PaSBench and LPS-Bench demo data through their
items / cases stages. The export is read back with the real `datasets` and `mlcroissant` packages."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml

from aura.cli import main
from aura.config import load_config
from aura.export_dataset.inputs import download_pin
from aura.export_dataset.parquet import read_split
from aura.io import read_jsonl
from aura.prompts import get_prompt
from aura.provenance import provenance, write_provenance
from conftest import REPO
from construction_fixture import finalize_args, write_config, write_stage_outputs

CONFIGS = {"aura": ["test"], "pasbench_text": ["test"], "pasbench_image": ["test"], "lpsbench": ["test"]}
# construction stage -> a prompt it used, written into the fixture's sidecars
STAGE_PROMPTS = {"tags": "p1_step_tagging", "classified": "p7_pair_classification", "pairs": "p8_pair_generation"}


def build_run(tmp) -> tuple:
    """A run folder: construction outputs in interim/ (three with sidecars naming a prompt and model `m`),
    the finalized dataset, PaSBench items and LPS-Bench cases of the demo data. Returns (config, paths)."""
    cfg = write_config(tmp)
    raw = yaml.safe_load(cfg.read_text())
    raw["pasbench"] = {"data": {"path": str(REPO / "data/raw/pasbench_demo")}}
    raw["lpsbench"] = {"cases": {"path": str(REPO / "data/raw/lpsbench_demo")}}
    cfg.write_text(yaml.safe_dump(raw))
    config = load_config(cfg)
    interim, processed = tmp / "interim", tmp / "processed"
    write_stage_outputs(interim)
    for stage, prompt in STAGE_PROMPTS.items():
        write_provenance(interim / f"{stage}.jsonl", provenance(stage, config, prompts=[get_prompt(prompt)], models=["m"]))
    assert main(finalize_args(cfg, interim, processed)) == 0
    assert main(["pasbench-items", "--configfile", str(cfg), "--out", f"items={interim}/pasbench/items.jsonl"]) == 0
    assert main(["lpsbench-cases", "--configfile", str(cfg), "--out", f"cases={interim}/lpsbench/cases.jsonl"]) == 0
    return cfg, {"dataset": processed / "dataset.jsonl", "items": interim / "pasbench/items.jsonl",
                 "cases": interim / "lpsbench/cases.jsonl"}


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("export")
    cfg, paths = build_run(tmp)
    out = tmp / "hf"
    assert main(["export-dataset", "--configfile", str(cfg), "--out", str(out)]) == 0
    return {"cfg": cfg, "out": out, "tmp": tmp, **paths}


def source_rows(run) -> dict[str, list[dict]]:
    items = list(read_jsonl(run["items"]))
    return {"aura": list(read_jsonl(run["dataset"])), "lpsbench": list(read_jsonl(run["cases"])),
            "pasbench_text": [i for i in items if i["modality"] == "text"],
            "pasbench_image": [i for i in items if i["modality"] == "image"]}


def test_load_dataset_reads_every_config_and_split(run):
    import datasets

    rows = source_rows(run)
    for name, splits in CONFIGS.items():
        loaded = datasets.load_dataset(str(run["out"]), name=name)
        assert sorted(loaded) == splits
        assert loaded["test"].num_rows == len(rows[name]) > 0, name
    aura = datasets.load_dataset(str(run["out"]), name="aura", split="test")
    f = aura.features
    assert f["pair_label"] == datasets.Value("string") and f["source_label"] == datasets.Value("int64")
    assert f["pairable"] == datasets.Value("bool") and f["safe_action_sketches"] == datasets.List(datasets.Value("string"))
    by_id = {r["item_id"]: r for r in rows["aura"]}
    for r in aura:
        src = by_id[r["item_id"]]
        assert r["pair_label"] in ("NSP", "SP") and r["pair_label"] == src["pair_label"]
        assert (r["dimension"], r["domain"], r["seed_id"], r["pair_id"]) == (
            src["dimension"], src["domain"], src["seed_id"], src["pair_id"])
        assert json.loads(r["steps_json"]) == src["steps"] and r["model_input"] == src["model_input"]
    images = datasets.load_dataset(str(run["out"]), name="pasbench_image", split="test")
    assert images.features["images"] == datasets.List(datasets.Image())
    assert [len(r["images"]) for r in images] == [len(i["images"]) for i in rows["pasbench_image"]]
    assert images[0]["images"][0].size == (320, 240)  # decoded PIL images
    lps = datasets.load_dataset(str(run["out"]), name="lpsbench", split="test")
    assert [r["case_id"] for r in lps] == [c["case_id"] for c in rows["lpsbench"]]
    assert json.loads(lps[0]["case_json"]) == rows["lpsbench"][0]["body"]


def test_croissant_record_validates_and_its_records_iterate(run):
    import mlcroissant as mlc

    dataset = mlc.Dataset(jsonld=str(run["out"] / "croissant.json"))
    assert not dataset.metadata.issues.errors, dataset.metadata.issues.report()
    assert {rs.name for rs in dataset.metadata.record_sets} == {f"{c}-{s}" for c, ss in CONFIGS.items() for s in ss}
    records = list(dataset.records("aura-test"))
    rows = source_rows(run)["aura"]
    assert sorted(r["aura-test/item_id"].decode() for r in records) == sorted(r["item_id"] for r in rows)
    assert {r["aura-test/pair_label"].decode() for r in records} <= {"NSP", "SP"}
    first = next(iter(dataset.records("pasbench_image-test")))
    assert first["pasbench_image-test/images"][0].size == (320, 240)


def test_card_carries_licences_citations_and_provenance(run):
    card = (run["out"] / "README.md").read_text()
    meta = yaml.safe_load(card.split("---\n")[1])
    assert [c["config_name"] for c in meta["configs"]] == list(CONFIGS)
    assert meta["pretty_name"] == "Benchmarks: AURA-Eval, PaSBench, LPS-Bench"  # from the families' releases
    assert "citation" not in meta and "metadata has no citation field" in card
    assert set(meta["license"]) == {"cc-by-4.0", "unknown"}  # demo seeds and PaSBench demo; LPS demo records none
    assert "10.18653/v1/2024.findings-emnlp.79" in card  # R-Judge, the seeds' source
    assert "Towards Evaluating Proactive Risk Awareness" in card and "tychenn/LPS-Bench" in card
    prov = json.loads(card.split("```json\n")[1].split("\n```")[0])
    for prompt in STAGE_PROMPTS.values():
        p = get_prompt(prompt)
        assert prov["aura"]["prompts"][p.ref]["sha256"] == p.sha256 and p.sha256 in card
    assert prov["aura"]["models"]["m"]["model_id"] == "fake-model"
    stages = {f["stage"] for f in prov["aura"]["files"] if f["sidecar"]}
    assert {"finalize", "tags", "classified", "pairs"} <= stages
    assert all(f["git_revision"] is None or len(f["git_revision"]) == 40 for f in prov["aura"]["files"] if f["sidecar"])
    assert prov["pasbench_text"]["sources"][0]["files_sha256"]["text_eval_hugging.json"]


def test_read_split_gives_rows_with_json_columns_decoded(run):
    rows = read_split(run["out"], "lpsbench", "test")
    cases = list(read_jsonl(run["cases"]))
    assert [r["case_id"] for r in rows] == [c["case_id"] for c in cases]
    assert rows[0]["case_json"] == cases[0]["body"] and rows[0]["tools"] == cases[0]["body"]["MCP"]["tools"]
    assert read_split(run["out"], "lpsbench", "test", decode_json=False)[0]["case_json"].startswith("{")


def test_download_pin_reads_commit_and_locked_checksum(tmp_path):
    url = "https://github.com/o/r/archive/" + "a" * 40 + ".tar.gz"
    lock = tmp_path / "lock.json"
    assert download_pin({"url": url, "lock": str(lock)})["archive_sha256"].startswith("not recorded")
    lock.write_text(json.dumps([{"url": url, "sha256": "b" * 64}]))
    assert download_pin({"url": url, "lock": str(lock), "subdir": "data"}) == {
        "url": url, "commit": "a" * 40, "subdir": "data", "archive_sha256": "b" * 64}


def one_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: export-dataset: "), err
    return err[0]


def test_missing_or_bad_input_is_one_line_and_leaves_the_folder_as_it_was(run, tmp_path, capsys):
    out = tmp_path / "hf"
    cfg = yaml.safe_load(run["cfg"].read_text())
    cfg["paths"]["processed"] = str(tmp_path / "nothing")
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(cfg))
    assert main(["export-dataset", "--configfile", str(tmp_path / "c.yaml"), "--out", str(out),
                 "--families", "aura"]) == 2
    assert str(tmp_path / "nothing" / "dataset.jsonl") in one_line(capsys)
    assert not out.exists() and not [p for p in tmp_path.iterdir() if p.name.startswith(".hf.")]
    # an earlier export stays whole when the next one fails on a cut-off line
    assert main(["export-dataset", "--configfile", str(run["cfg"]), "--out", str(out), "--families", "lpsbench"]) == 0
    before = {p.name: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    bad = tmp_path / "interim" / "lpsbench" / "cases.jsonl"
    bad.parent.mkdir(parents=True)
    bad.write_text(run["cases"].read_text() + '{"case_id": "cut')
    cfg["paths"]["interim"] = str(tmp_path / "interim")
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(cfg))
    assert main(["export-dataset", "--configfile", str(tmp_path / "c.yaml"), "--out", str(out),
                 "--families", "lpsbench"]) == 2
    assert f"{bad}:7" in one_line(capsys)
    assert {p.name: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before


def test_a_folder_that_is_not_an_export_is_refused(run, tmp_path, capsys):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep me")
    assert main(["export-dataset", "--configfile", str(run["cfg"]), "--out", str(tmp_path / "mine")]) == 2
    assert "not an earlier export" in one_line(capsys)
    assert (tmp_path / "mine" / "notes.txt").read_text() == "keep me"


def test_the_cli_does_not_import_the_export_packages_until_the_command_runs():
    code = ("import sys; from aura.cli import build_parser; build_parser(); "
            "print(sorted(m for m in ('datasets', 'mlcroissant', 'pyarrow') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={"PYTHONPATH": str(REPO / "src"), "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_constructed_items_are_their_own_split_with_an_unknown_licence(run, tmp_path):
    import datasets

    from aura.families.pasbench.data import PasItem

    log = "[LOG START]\n[Time] 08:00 AM\n[Location] Kitchen\n[Environmental Observation] A pan.\n" \
          "[Behavioral Observation] Cooks.\n[LOG END]"
    item = PasItem(item_id="text-9001", modality="text", index=9001, safety_knowledge="k", condition="c",
                   risk_reason="r", trigger="t", log=log, images=[], n_images=0, severity="info",
                   words=len(log.split()), source="constructed").model_dump()
    cfg = yaml.safe_load(run["cfg"].read_text())
    cfg["pasbench"]["construct"] = {"enabled": True, "generator": "m", "reviewer": "m"}
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(cfg))
    constructed = run["tmp"] / "interim" / "pasbench" / "constructed_text.jsonl"
    constructed.write_text(json.dumps(item) + "\n")
    try:
        out = tmp_path / "hf"
        assert main(["export-dataset", "--configfile", str(tmp_path / "c.yaml"), "--out", str(out),
                     "--families", "pasbench"]) == 0
    finally:
        constructed.unlink()
    loaded = datasets.load_dataset(str(out), name="pasbench_text")
    assert sorted(loaded) == ["constructed", "test"] and loaded["constructed"][0]["item_id"] == "text-9001"
    card = (out / "README.md").read_text()
    assert "| pasbench_text | PaSBench: proactive risk awareness on text logs and images | constructed | 1 | unknown |" in card
