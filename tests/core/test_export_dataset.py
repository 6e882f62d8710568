"""`python -m aura export-dataset` on a run the test builds (no model call): the construction fixture's stage
outputs with real provenance sidecars, finalize, and the PaSBench and LPS-Bench demo data through their
items / cases stages. The export is read back with the real `datasets` and `mlcroissant` packages."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from aura.cli import main
from aura.config import load_config
from aura.export_dataset.card import size_category
from aura.export_dataset.command import project_url
from aura.export_dataset.inputs import download_pin, is_demo
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
    assert meta["pretty_name"] == "DEMO, not the benchmark: Benchmarks: AURA-Eval, PaSBench, LPS-Bench"  # releases' titles
    assert "citation" not in meta and "metadata has no citation field" in card
    assert set(meta["license"]) == {"cc-by-4.0", "mit"}  # demo seeds and PaSBench demo; LPS demo: the project's
    assert ("LPS-Bench demo cases (written for this project, upstream's layout; not upstream's cases); folder: "
            "data/raw/lpsbench_demo;") in card and "license: mit (written for this project, under its LICENSE)" in card
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


def card_text(run) -> str:
    return (run["out"] / "README.md").read_text()


def body_lines(card: str) -> list[str]:
    """The card's non-empty lines after its front matter."""
    return [line for line in card.split("---\n", 2)[2].splitlines() if line.strip()]


def test_front_matter_reads_back_with_the_hub_card_parser(run):
    from huggingface_hub import DatasetCard

    data = DatasetCard.load(run["out"] / "README.md").data
    assert data.task_categories == ["text-generation", "image-text-to-text"]  # AURA, LPS; PaSBench adds images
    assert {"agent-safety", "proactive-safety", "computer-use-agents", "benchmark"} <= set(data.tags)
    rows = sum(len(r) for r in source_rows(run).values())
    assert data.size_categories == [size_category(rows)] == ["n<1K"]
    assert data.annotations_creators == ["machine-generated", "expert-generated"]
    assert data.source_datasets == ["original"]  # every family read its own demo data
    assert data.language == ["en"] and sorted(data.license) == ["cc-by-4.0", "mit"]
    assert data.pretty_name == "DEMO, not the benchmark: Benchmarks: AURA-Eval, PaSBench, LPS-Bench"
    assert [c["config_name"] for c in data.configs] == list(CONFIGS)
    assert {i["config_name"]: i["splits"][0]["num_examples"] for i in data.dataset_info} == {
        name: len(r) for name, r in source_rows(run).items()}


def test_size_category_follows_the_row_count():
    assert [size_category(n) for n in (0, 999, 1000, 9999, 10_000, 250_000, 10**13)] == [
        "n<1K", "n<1K", "1K<n<10K", "1K<n<10K", "10K<n<100K", "100K<n<1M", "n>1T"]


def section(card: str, heading: str) -> str:
    return card.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]


def test_card_sections_hold_each_familys_own_text(run):
    card = card_text(run)
    own = {"Uses": ("No-Safe-Path", "warn of the danger without being asked", "planning-time safety"),
           "Out-of-scope use": ("Prompt-injection", "without their consent", "real tools, accounts or credentials"),
           "Limitations": ("157 R-Judge trajectories", "416 items", "570 cases"),
           "Bias": ("Finance 17 seeds", "Chinese safety-education books", "frontier-LLM brainstorming"),
           "Personal and sensitive information": ("invented personal data", "drawn at random",
                                                  "no real credentials"),
           "Data collection": ("P1-P9", "DeepSeek-R1", "orchestrator agent")}
    for heading, (aura, pasbench, lpsbench) in own.items():
        text = section(card, heading)
        parts = [text.split(f"**{name}.**")[1].split("**")[0] for name in ("AURA-Eval", "PaSBench", "LPS-Bench")]
        assert aura in parts[0] and pasbench in parts[1] and lpsbench in parts[2], heading


def test_every_citation_has_authors_year_and_url(run):
    bib = card_text(run).split("```bibtex\n")[1].split("\n```")[0]
    entries = {e.split("{", 1)[1].split(",", 1)[0]: e for e in ("\n" + bib).split("\n@")[1:]}
    assert set(entries) == {"aura_eval_2026", "yuan2024rjudge", "yuan2025pasbench", "chen2026lpsbench"}
    for key, entry in entries.items():
        assert "author = {" in entry and "year = {20" in entry, key
    for key in ("yuan2024rjudge", "yuan2025pasbench", "chen2026lpsbench"):
        assert "url = {https://" in entries[key], key
    assert "Yuan, Youliang and Jiao, Wenxiang" in entries["yuan2025pasbench"]
    assert "Chen, Tianyu" in entries["chen2026lpsbench"] and "2602.03255" in entries["chen2026lpsbench"]
    # the AURA-Eval paper's text names no authors and no address: the entry says so instead of inventing them
    assert "names no authors" in entries["aura_eval_2026"]


def test_card_and_record_hold_no_local_path(run):
    texts = {"card": card_text(run), "record": (run["out"] / "croissant.json").read_text()}
    for name, text in texts.items():
        for local in (str(run["tmp"]), str(REPO), str(run["cfg"])):
            assert local not in text, (name, local)
    card = texts["card"]
    assert f"(config `{run['cfg'].name}`, config hash `" in card
    assert "| {processed}/dataset.jsonl |" in card  # the configs table's "read from"
    assert "{interim}/tags.jsonl" in card and "{interim}/pasbench/items.jsonl" in card


def test_a_demo_export_says_so_in_its_title_and_first_line(run):
    import mlcroissant as mlc

    lines = body_lines(card_text(run))
    assert lines[0] == "# DEMO, not the benchmark: Benchmarks: AURA-Eval, PaSBench, LPS-Bench"
    assert lines[1].startswith("**This export is a demo, not the benchmark**: the run's config `config.yaml` is "
                               "not the paper's")
    for family, data in (("AURA-Eval", "demo_seeds"), ("PaSBench", "pasbench_demo"), ("LPS-Bench", "lpsbench_demo")):
        assert f"{family}: demo data: {data}" in lines[1]
    record = mlc.Dataset(jsonld=str(run["out"] / "croissant.json")).metadata
    assert record.name.startswith("DEMO, not the benchmark: ") and "DEMO, not the benchmark" in record.description


def paper_config(run, tmp_path, **aura) -> Path:
    """A config extending the repository's paper config, reading the test run's files (AURA only)."""
    cfg = tmp_path / "config" / "mine.yaml"
    cfg.parent.mkdir(parents=True)
    cfg.write_text(yaml.safe_dump({"extends": str(REPO / "config" / "paper.yaml"), "name": "aura-paper-copy",
                                   "families": ["aura"], "aura": aura,
                                   "paths": {"interim": str(run["tmp"] / "interim"),
                                             "processed": str(run["tmp"] / "processed")}}))
    return cfg


def test_a_paper_config_run_is_the_benchmark_unless_its_seeds_are_the_demo_seeds(run, tmp_path):
    cfg = paper_config(run, tmp_path)
    assert main(["export-dataset", "--configfile", str(cfg), "--out", str(tmp_path / "paper")]) == 0
    card = (tmp_path / "paper" / "README.md").read_text()
    lines = body_lines(card)
    assert lines[0] == "# AURA-Eval: acting under risk awareness in agent trajectories"
    assert "demo" not in lines[1].lower() and "DEMO" not in card
    meta = yaml.safe_load(card.split("---\n")[1])
    assert meta["source_datasets"] == ["extended|other-r-judge"]  # R-Judge, the paper's seeds
    # the same paper config reading the family's demo seeds: a demo again, for the family's reason only
    demo = paper_config(run, tmp_path / "d", seed_download={"enabled": False})
    raw = yaml.safe_load(demo.read_text())
    raw["paths"]["seeds"] = str(REPO / "data/raw/demo_seeds")
    demo.write_text(yaml.safe_dump(raw))
    assert main(["export-dataset", "--configfile", str(demo), "--out", str(tmp_path / "demo")]) == 0
    lines = body_lines((tmp_path / "demo" / "README.md").read_text())
    assert lines[0] == "# DEMO, not the benchmark: AURA-Eval: acting under risk awareness in agent trajectories"
    assert lines[1].startswith("**This export is a demo, not the benchmark**: AURA-Eval: demo data: demo_seeds.")


def test_croissant_record_has_a_url_and_responsible_ai_fields(run, tmp_path, capsys):
    import mlcroissant as mlc

    record = json.loads((run["out"] / "croissant.json").read_text())
    assert record["url"] == (project_url() or "README.md")
    for key in ("rai:dataCollection", "rai:dataUseCases", "rai:dataLimitations", "rai:dataBiases",
                "rai:personalSensitiveInformation"):
        assert record[key], key
    meta = mlc.Dataset(jsonld=str(run["out"] / "croissant.json")).metadata
    assert not meta.issues.errors, meta.issues.report()
    assert [b.split(":")[0] for b in meta.data_biases] == ["AURA-Eval", "PaSBench", "LPS-Bench"]
    assert any("Chinese safety-education books" in b for b in meta.data_biases)
    assert any(u.startswith("LPS-Bench: Measuring the planning-time safety") for u in meta.data_use_cases)
    assert any("out of scope: " in x for x in meta.data_limitations)
    assert "PaSBench: Per the PaSBench paper" in meta.data_collection
    assert len(meta.personal_sensitive_information) == 3
    # a Hub id gives the record's url and the card's load line; a malformed one is one line
    out = tmp_path / "hub"
    assert main(["export-dataset", "--configfile", str(run["cfg"]), "--out", str(out), "--families", "lpsbench",
                 "--hub-id", "someone/lps-demo"]) == 0
    assert json.loads((out / "croissant.json").read_text())["url"] == "https://huggingface.co/datasets/someone/lps-demo"
    assert 'load_dataset("someone/lps-demo", name="lpsbench"' in (out / "README.md").read_text()
    capsys.readouterr()
    assert main(["export-dataset", "--configfile", str(run["cfg"]), "--out", str(tmp_path / "bad"),
                 "--hub-id", "not an id"]) == 2
    assert "--hub-id: 'not an id' is not a Hugging Face dataset id" in one_line(capsys)
    assert not (tmp_path / "bad").exists()


def test_demo_licences_hold_where_a_wheel_lays_the_package_out(run, tmp_path, monkeypatch):
    """A wheel carries no data/: ROOT is the package's _resources, and the export runs in a copy of the workflow
    that holds data/raw/. The families' demo data are told apart there as in a checkout, so their licences hold."""
    import aura.families.aura as aura_family
    import aura.families.lpsbench as lps_family
    import aura.families.pasbench as pas_family
    import aura.resources
    from aura.families.aura.dataset_export import seed_source
    from aura.stats.reproduction import demo_reason

    bundled = tmp_path / "venv" / "lib" / "site-packages" / "aura" / "_resources"  # a wheel's ROOT
    work = tmp_path / "work"
    for name in ("demo_seeds", "lpsbench_demo", "pasbench_demo"):
        shutil.copytree(REPO / "data" / "raw" / name, work / "data" / "raw" / name)
    monkeypatch.setattr(aura.resources, "ROOT", bundled)
    for module in (aura_family, lps_family, pas_family):  # the manifests as a wheel builds them: under its ROOT
        monkeypatch.setattr(module, "FAMILY", replace(module.FAMILY, demo_data=tuple(
            bundled / Path(d).relative_to(REPO) for d in module.FAMILY.demo_data)))
    monkeypatch.chdir(work)
    config = load_config(run["cfg"])
    assert seed_source(config, Path("data/raw/demo_seeds"))["license"] == "cc-by-4.0"
    assert seed_source(config, REPO / "data" / "raw" / "demo_seeds")["license"] == "unknown"  # not this install's
    assert is_demo("data/raw/lpsbench_demo", lps_family.FAMILY) and is_demo(work / "data/raw/pasbench_demo",
                                                                              pas_family.FAMILY)
    assert not is_demo("data/raw/demo_seeds", lps_family.FAMILY)
    assert demo_reason(config, lps_family.FAMILY, data=["data/raw/lpsbench_demo"]) == "demo data: lpsbench_demo"
