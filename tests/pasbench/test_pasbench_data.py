"""PaSBench data: the loader on the demo set and on upstream-shaped fixtures written here, its one-line errors
(file and index), the pasbench-items / pasbench-fetch stages, the demo drawing script, and (opt-in, env
AURA_PASBENCH_DIR, and AURA_PASBENCH_SUB_IMAGES for their count file) the real upstream files."""
from __future__ import annotations

import importlib.util
import json
import os
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import yaml
from PIL import Image

from aura.cli import main
from aura.config import UserError, validate_config
from aura.fetch import MARKER
from aura.families.pasbench.data import (IMAGE_FILE, SEVERITY_FILE, TEXT_FILE, PasDataError, PasItem, load_items,
                                         read_folder, run_fetch, run_items, select)
from aura.pipeline.context import StageContext
from aura.pipeline.stage_args import parse_paths
from conftest import REPO, base_config
from archive_server import http, tar_gz  # noqa: F401  (http: the local archive server fixture)

DEMO = REPO / "data" / "raw" / "pasbench_demo"

# A log whose whitespace word count is derived by hand: "[LOG", "START]" (2), "[Time]" (3), "07:00", "AM" (5),
# "[Location]" (6), "Kitchen" (7), "[Environmental", "Observation]" (9), "A pan of oil on a high flame." (17),
# "[Behavioral", "Observation]" (19), "Lee walks out of the kitchen." (25), "[LOG", "END]" (27).
LOG = ("[LOG START]\n[Time]\n07:00 AM\n[Location]\nKitchen\n[Environmental Observation]\n"
       "A pan of oil on a high flame.\n[Behavioral Observation]\nLee walks out of the kitchen.\n[LOG END]")
LOG_WORDS = 27


def _rec(k: str, inp: str) -> dict:
    return {"safety_knowledge": f"knowledge {k}", "condition_or_scenario": f"condition {k}",
            "risk_reason": f"reason {k}", "risk_triggering_behavior": f"trigger {k}", "input": inp}


def _png(path: Path, color=(200, 30, 30)) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (8, 6), color).save(path)


def write_counts(path: Path, counts: dict[str, int]) -> Path:
    """A sub-image count file (pasbench.data.sub_images): header item_id,sub_images, one row per item."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("item_id,sub_images\n" + "".join(f"{k},{v}\n" for k, v in counts.items()), encoding="utf-8")
    return path


def write_folder(root: Path, text=None, images=None, severity=None, files=("5.png", "7_1.png", "7_2.png")) -> Path:
    """An upstream-shaped folder: 2 text records (+ aligned severity), 2 image records: "5.png" (one file: an
    upstream composite, its count from a count file) and "7.png" (split into 7_1.png, 7_2.png); image 0 shares
    knowledge B with text 1."""
    root.mkdir(parents=True, exist_ok=True)
    text = text if text is not None else [_rec("A", LOG), _rec("B", "[LOG START]\nshort log\n[LOG END]")]
    severity = severity if severity is not None else [
        {"safety_knowledge": r["safety_knowledge"], "risk_reason": r["risk_reason"], "severity": s}
        for r, s in zip(text, ("critical", "info"))]
    images = images if images is not None else [_rec("B", "5.png"), _rec("C", "7.png")]
    for name, data in ((TEXT_FILE, text), (SEVERITY_FILE, severity), (IMAGE_FILE, images)):
        (root / name).write_text(json.dumps(data), encoding="utf-8")
    for f in files:
        _png(root / "images" / f)
    return root


# ---------------------------------------------------------------------------------------------
# the demo set


def test_demo_set_counts_by_modality_severity_and_images():
    items = load_items(DEMO)
    assert [i.item_id for i in items] == [*(f"text-{k:04d}" for k in range(6)), *(f"image-{k:04d}" for k in range(4))]
    text = [i for i in items if i.modality == "text"]
    image = [i for i in items if i.modality == "image"]
    # severity.json: critical, warning, info, critical, warning, info (README)
    assert Counter(i.severity for i in text) == {"critical": 2, "warning": 2, "info": 2}
    assert [i.severity for i in text[:3]] == ["critical", "warning", "info"]
    # image items 0-3 share the knowledge of text 1 (warning), 3 (critical), 0 (critical), 4 (warning)
    assert [i.severity for i in image] == ["warning", "critical", "critical", "warning"]
    assert [i.safety_knowledge for i in image] == [text[k].safety_knowledge for k in (1, 3, 0, 4)]
    assert [i.n_images for i in image] == [1, 2, 3, 3]
    assert image[1].images == [str(DEMO / "images" / "1_1.png"), str(DEMO / "images" / "1_2.png")]
    assert {i.source for i in items} == {"demo"}
    # word lengths: three short logs (~120 words) and three long ones (~300)
    assert sorted(i.words for i in text) == [116, 126, 134, 253, 300, 335]
    for i in text:  # the upstream layout: LOG START, 4-5 time-stamped entries, LOG END
        assert i.log.startswith("[LOG START]") and i.log.endswith("[LOG END]")
        assert 4 <= i.log.count("[Time]") <= 8
        assert i.log.count("[Behavioral Observation]") == i.log.count("[Time]")


def test_demo_pngs_are_small_and_what_the_script_draws(tmp_path):
    spec = importlib.util.spec_from_file_location("draw_demo", REPO / "scripts" / "draw_pasbench_demo.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    committed = sorted(p.name for p in (DEMO / "images").iterdir())
    used = sorted(Path(p).name for i in load_items(DEMO) for p in i.images)
    assert committed == used == sorted(script.file_names())  # every drawn file is used by an item, no extras
    drawn = {p.name: p for p in script.draw(tmp_path)}
    for name in committed:
        path = DEMO / "images" / name
        assert path.stat().st_size < 30_000
        old = np.asarray(Image.open(path).convert("RGB"), dtype=float)
        new = np.asarray(Image.open(drawn[name]).convert("RGB"), dtype=float)
        assert old.shape == new.shape == (240, 320, 3)
        assert np.abs(old - new).mean() < 1.0, f"{name}: the committed PNG differs from what the script draws"


# ---------------------------------------------------------------------------------------------
# upstream-shaped fixtures


def test_upstream_shaped_records_become_contract_items(tmp_path):
    root = write_folder(tmp_path / "pas")
    # 5.png is one upstream composite: the count file says 3 sub-images; 7.png's two split files must say 2
    items = load_items(root, sub_images=write_counts(tmp_path / "counts.csv", {"image-0000": 3, "image-0001": 2}))
    assert items[0].model_dump() == {
        "item_id": "text-0000", "modality": "text", "index": 0, "safety_knowledge": "knowledge A",
        "condition": "condition A", "risk_reason": "reason A", "trigger": "trigger A", "log": LOG,
        "images": [], "n_images": 0, "severity": "critical", "words": LOG_WORDS, "source": "upstream"}
    assert items[2].model_dump() == {
        "item_id": "image-0000", "modality": "image", "index": 0, "safety_knowledge": "knowledge B",
        "condition": "condition B", "risk_reason": "reason B", "trigger": "trigger B", "log": None,
        "images": [str(root / "images" / "5.png")], "n_images": 3,  # the composite's count, not its 1 file
        "severity": "info",  # text 1 has knowledge B and severity info
        "words": None, "source": "upstream"}
    assert items[3].images == [str(root / "images" / "7_1.png"), str(root / "images" / "7_2.png")]
    assert items[3].n_images == 2
    assert items[3].severity is None  # knowledge C has no text record


def test_sub_images_sort_numerically_and_a_whole_image_wins(tmp_path):
    root = write_folder(tmp_path / "pas", files=("5.png", "5_1.png", "7_4.png", "7_2.png", "7_3.png", "7_1.png"))
    counts = write_counts(tmp_path / "counts.csv", {"image-0000": 2, "image-0001": 4})
    image = [i for i in load_items(root, sub_images=counts) if i.modality == "image"]
    assert [Path(p).name for p in image[0].images] == ["5.png"]
    assert [Path(p).name for p in image[1].images] == ["7_1.png", "7_2.png", "7_3.png", "7_4.png"]
    assert [i.n_images for i in image] == [2, 4]  # 5.png a composite of 2 (count file), 7: four files


def test_upstream_zip_folder_name_and_a_configured_image_folder(tmp_path):
    root = write_folder(tmp_path / "pas", files=())
    for f in ("5.png", "7_1.png"):
        _png(root / "combine_images" / f)
    # 5.png: a composite of 2 (count file); 7_1.png: 7.png's one split sub-image
    counts = write_counts(tmp_path / "a.csv", {"image-0000": 2, "image-0001": 1})
    assert [i.n_images for i in load_items(root, sub_images=counts) if i.modality == "image"] == [2, 1]
    elsewhere = tmp_path / "my_images"
    for f in ("5_1.png", "5_2.png", "5_3.png", "7.png"):
        _png(elsewhere / f)
    # 5: three split files (the count file agrees); 7.png: a composite of 4
    counts = write_counts(tmp_path / "b.csv", {"image-0000": 3, "image-0001": 4})
    assert [i.n_images for i in load_items(root, images_dir=elsewhere, sub_images=counts)
            if i.modality == "image"] == [3, 4]


def test_max_items_takes_the_first_by_index():
    items = load_items(DEMO, {"text": 3, "image": 1})
    assert [i.item_id for i in items] == ["text-0000", "text-0001", "text-0002", "image-0000"]
    assert [i.item_id for i in load_items(DEMO, {"text": 0})] == [f"image-{k:04d}" for k in range(4)]
    assert len(load_items(DEMO, {"text": None, "image": None})) == 10
    with pytest.raises(PasDataError, match=r"pasbench.max_items.text: expected a non-negative integer"):
        select([], {"text": -1})
    with pytest.raises(PasDataError, match=r"unknown modality \['video'\]"):
        select([], {"video": 2})


def test_images_not_required_leaves_out_image_items_without_images(tmp_path):
    root = write_folder(tmp_path / "pas", files=("7_1.png",))
    with pytest.raises(PasDataError) as ei:
        read_folder(root)
    assert str(ei.value).startswith(f"{root / IMAGE_FILE}: record at index 0: image 5.png not found under ")
    loaded = read_folder(root, images_required=False)
    assert [i.item_id for i in loaded.items] == ["text-0000", "text-0001", "image-0001"]
    assert loaded.records == {"text": 2, "image": 2} and len(loaded.left_out) == 1
    assert loaded.left_out[0].startswith("index 0: image 5.png not found")


def test_source_file_names_the_origin(tmp_path):
    root = write_folder(tmp_path / "pas")
    (root / "source.txt").write_text("constructed\n")
    assert {i.source for i in load_items(root)} == {"constructed"}
    (root / "source.txt").write_text("mine\n")
    with pytest.raises(PasDataError, match=r"source.txt: expected one of demo, upstream, constructed; got 'mine'"):
        load_items(root)


# ---------------------------------------------------------------------------------------------
# errors: one line naming the file and the index


def _error(root: Path) -> str:
    with pytest.raises(PasDataError) as ei:
        load_items(root)
    msg = str(ei.value)
    assert "\n" not in msg and isinstance(ei.value, UserError)  # the CLI prints UserErrors as one line, exit 2
    return msg


@pytest.mark.parametrize("bad, expected", [
    ({k: v for k, v in _rec("B", "x").items() if k != "risk_reason"}, "record at index 1: risk_reason: Field required"),
    ({**_rec("B", "x"), "input": "  "}, "record at index 1: input: Value error, must not be empty"),
    ({**_rec("B", "x"), "safety_knowledge": 3}, "record at index 1: safety_knowledge: Input should be a valid string"),
    (["not", "an", "object"], "record at index 1 is a list, not an object"),
])
def test_malformed_text_record_names_file_and_index(tmp_path, bad, expected):
    text = [_rec("A", LOG), bad]
    sev = [{"safety_knowledge": f"knowledge {k}", "severity": "info"} for k in "AB"]
    msg = _error(write_folder(tmp_path / "pas", text=text, severity=sev))
    assert msg.startswith(f"{tmp_path / 'pas' / TEXT_FILE}: {expected}")


def test_severity_misaligned_names_the_severity_file_and_index(tmp_path):
    sev = [{"safety_knowledge": "knowledge A", "severity": "critical"},
           {"safety_knowledge": "knowledge Z", "severity": "info"}]
    msg = _error(write_folder(tmp_path / "pas", severity=sev))
    assert msg.startswith(f"{tmp_path / 'pas' / SEVERITY_FILE}: record at index 1: safety_knowledge differs from "
                          f"{TEXT_FILE} index 1")
    assert msg.endswith("not aligned")


def test_severity_count_and_value_errors(tmp_path):
    short = [{"safety_knowledge": "knowledge A", "severity": "critical"}]
    msg = _error(write_folder(tmp_path / "a", severity=short))
    assert msg.startswith(f"{tmp_path / 'a' / SEVERITY_FILE}: 1 records, but {TEXT_FILE} has 2")
    bad = [{"safety_knowledge": "knowledge A", "severity": "critical"},
           {"safety_knowledge": "knowledge B", "severity": "severe"}]
    msg = _error(write_folder(tmp_path / "b", severity=bad))
    assert msg.startswith(f"{tmp_path / 'b' / SEVERITY_FILE}: record at index 1: severity: Input should be "
                          "'critical', 'warning' or 'info'")


@pytest.mark.parametrize("files, inp, expected", [
    (("5.png",), "7.png", "image 7.png not found under"),
    (("5.png", "7_1.png", "7_3.png"), "7.png", "sub-images of 7.png under"),
    (("5.png", *(f"7_{k}.png" for k in range(1, 6))), "7.png",
     "are numbered [1, 2, 3, 4, 5]; expected 1..n with n at most 4"),
    (("5.png",), "../7.png", "input '../7.png' is not an image file name"),
    (("5.png",), "notes.txt", "input 'notes.txt' is not an image file name"),
])
def test_image_errors_name_file_and_index(tmp_path, files, inp, expected):
    root = write_folder(tmp_path / "pas", images=[_rec("B", "5.png"), _rec("C", inp)], files=files)
    msg = _error(root)
    assert msg.startswith(f"{root / IMAGE_FILE}: record at index 1: ")
    assert expected in msg


def test_file_level_errors(tmp_path):
    root = write_folder(tmp_path / "pas")
    (root / IMAGE_FILE).unlink()
    assert _error(root).startswith(f"{root / IMAGE_FILE}: file not found")
    (root / IMAGE_FILE).write_text("{not json")
    assert _error(root).startswith(f"{root / IMAGE_FILE}: not valid JSON: ")
    (root / IMAGE_FILE).write_text('{"a": 1}')
    assert _error(root) == f"{root / IMAGE_FILE}: expected a JSON list of records, got dict"
    (root / IMAGE_FILE).write_bytes(b'["\xff"]')
    assert "not valid UTF-8: byte 0xff at offset 2" in _error(root)
    assert _error(tmp_path / "nowhere").endswith("the PaSBench data folder does not exist or is not a directory")


def test_pasitem_rejects_inconsistent_rows():
    good = dict(item_id="text-0003", modality="text", index=3, safety_knowledge="k", condition="c", risk_reason="r",
                trigger="t", log="a b c", images=[], n_images=0, severity=None, words=3, source="demo")
    assert PasItem(**good).words == 3
    for change in ({"item_id": "text-3"}, {"words": 4}, {"images": ["x.png"]}, {"severity": "high"},
                   {"source": "mine"}, {"extra": 1}):
        with pytest.raises(ValueError):
            PasItem(**{**good, **change})
    img = {**good, "item_id": "image-0003", "modality": "image", "log": None, "words": None}
    with pytest.raises(ValueError, match="1-4 images"):
        PasItem(**{**img, "images": [f"{k}.png" for k in range(5)], "n_images": 5})


# ---------------------------------------------------------------------------------------------
# stages


def _ctx(tmp_path: Path, pasbench: dict, stage="pasbench-items", inputs=(), outputs=()) -> StageContext:
    raw = base_config("http://127.0.0.1:9/v1", tmp_path / "cache")  # no model is called
    raw["pasbench"] = pasbench
    return StageContext(stage=stage, config=validate_config(raw), inputs=parse_paths(list(inputs), "--in"),
                        outputs=parse_paths(list(outputs), "--out"))


def test_items_stage_writes_items_with_provenance(tmp_path):
    out = tmp_path / "interim" / "pasbench" / "items.jsonl"
    ctx = _ctx(tmp_path, {"data": {"path": str(DEMO)}, "max_items": {"text": 4, "image": None}},
               outputs=[f"items={out}"])
    run_items(ctx)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["item_id"] for r in rows] == [*(f"text-{k:04d}" for k in range(4)), *(f"image-{k:04d}" for k in range(4))]
    assert [PasItem(**r) for r in rows] == load_items(DEMO, {"text": 4})
    prov = json.loads(Path(f"{out}.prov.json").read_text())
    assert prov["stage"] == "pasbench-items" and prov["rows"] == 8
    assert prov["items"] == {"text": 4, "image": 4} and prov["records"] == {"text": 6, "image": 4}
    assert prov["images_left_out"] == 0 and prov["folder"] == str(DEMO)
    assert sorted(prov["files"]) == sorted([TEXT_FILE, IMAGE_FILE, SEVERITY_FILE])
    assert all(len(h) == 64 for h in prov["files"].values())


def test_items_stage_error_writes_nothing(tmp_path):
    root = write_folder(tmp_path / "pas", files=("5.png",))  # 7.png and its sub-images missing
    out = tmp_path / "items.jsonl"
    ctx = _ctx(tmp_path, {"data": {"path": str(DEMO)}}, inputs=[f"data_dir={root}"], outputs=[f"items={out}"])
    with pytest.raises(PasDataError, match=r"multi_modal_eval_hugging.json: record at index 1: image 7.png not found"):
        run_items(ctx)
    assert not out.exists() and not Path(f"{out}.prov.json").exists()
    assert list(tmp_path.glob("*.tmp")) == [] and list(tmp_path.glob(".items*")) == []


def test_items_cli_prints_one_line_and_exits_2(tmp_path, capsys):
    root = write_folder(tmp_path / "pas", severity=[{"safety_knowledge": "knowledge A", "severity": "info"},
                                                    {"safety_knowledge": "knowledge A", "severity": "info"}])
    raw = base_config("http://127.0.0.1:9/v1", tmp_path / "cache")
    raw["pasbench"] = {"data": {"path": str(root)}}
    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml.safe_dump(raw))
    out = tmp_path / "items.jsonl"
    assert main(["pasbench-items", "--configfile", str(cfg), "--out", f"items={out}"]) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    assert err == [f"error: pasbench-items: {root / SEVERITY_FILE}: record at index 1: safety_knowledge differs from "
                   f"{TEXT_FILE} index 1 ('knowledge A' vs 'knowledge B'): not aligned"]
    assert not out.exists()
    assert main(["pasbench-items", "--configfile", str(cfg), "--in", f"data_dir={DEMO}", "--out", f"items={out}"]) == 0
    assert len(out.read_text().splitlines()) == 10


def _upstream_archive(http, name: str, root: Path) -> Path:
    """The pinned archive's layout: <top>/data/public_benches/pasbench/{3 JSON files, combine_images/README.md}
    (upstream's images are not in it)."""
    top = "HomeGuard-0123abc/data/public_benches/pasbench"
    files = {f"{top}/{n}": (root / n).read_bytes() for n in (TEXT_FILE, IMAGE_FILE, SEVERITY_FILE)}
    files[f"{top}/combine_images/README.md"] = b"download the images separately\n"
    files["HomeGuard-0123abc/README.md"] = b"vendored\n"
    return tar_gz(http.root / name, files)


def test_fetch_stage_downloads_pins_and_items_load_text_only(http, tmp_path):
    _upstream_archive(http, "pin.tar.gz", write_folder(tmp_path / "src"))
    dest, lock = tmp_path / "pasbench_upstream", tmp_path / "pasbench.lock.json"
    data = {"download": {"url": http.url("pin.tar.gz"), "subdir": "data/public_benches/pasbench", "dest": str(dest),
                         "lock": str(lock), "counts": {"text": 2, "image": 2}}, "images_required": False}
    run_fetch(_ctx(tmp_path, {"data": data}, stage="pasbench-fetch"))
    assert (dest / MARKER).is_file() and (dest / TEXT_FILE).is_file()
    assert json.loads(lock.read_text())["url"] == http.url("pin.tar.gz")
    out = tmp_path / "items.jsonl"
    run_items(_ctx(tmp_path, {"data": data}, outputs=[f"items={out}"]))  # reads download.dest
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["item_id"] for r in rows] == ["text-0000", "text-0001"]  # both image items left out: no images
    assert json.loads(Path(f"{out}.prov.json").read_text())["images_left_out"] == 2
    run_fetch(_ctx(tmp_path, {"data": data}, stage="pasbench-fetch"))  # second call: marker matches, no download
    assert http.requests == ["/pin.tar.gz"]


def test_fetch_stage_refuses_other_counts_and_installs_nothing(http, tmp_path):
    _upstream_archive(http, "pin.tar.gz", write_folder(tmp_path / "src"))
    dest, lock = tmp_path / "pasbench_upstream", tmp_path / "pasbench.lock.json"
    data = {"download": {"url": http.url("pin.tar.gz"), "subdir": "data/public_benches/pasbench", "dest": str(dest),
                         "lock": str(lock), "counts": {"text": 288, "image": 128}}}
    with pytest.raises(PasDataError) as ei:
        run_fetch(_ctx(tmp_path, {"data": data}, stage="pasbench-fetch"))
    assert "record counts differ from pasbench.data.download.counts: text: expected 288, found 2; " \
           "image: expected 128, found 2" in str(ei.value)
    assert str(ei.value).startswith("pasbench-fetch: ") and "\n" not in str(ei.value)
    assert not dest.exists() and not lock.exists()


def test_fetch_stage_without_download_is_one_line(tmp_path):
    with pytest.raises(PasDataError, match="no enabled pasbench.data.download section"):
        run_fetch(_ctx(tmp_path, {"data": {"path": str(DEMO)}}, stage="pasbench-fetch"))


# ---------------------------------------------------------------------------------------------
# opt-in: the real upstream files (paper Table 1)


@pytest.mark.skipif(not os.environ.get("AURA_PASBENCH_DIR"), reason="set AURA_PASBENCH_DIR to a folder of the "
                    "upstream PaSBench JSON files (images optional)")
def test_upstream_files_match_the_paper():
    folder = Path(os.environ["AURA_PASBENCH_DIR"])
    # the images' sub-image counts need the count file (AURA_PASBENCH_SUB_IMAGES); without it: text only
    sub = os.environ.get("AURA_PASBENCH_SUB_IMAGES")
    loaded = read_folder(folder, images_required=False, sub_images=sub, text_only=not sub)
    assert loaded.records == {"text": 288, "image": 128}  # Table 1: Size
    text = [i for i in loaded.items if i.modality == "text"]
    image = [i for i in loaded.items if i.modality == "image"]
    words = [i.words for i in text]
    # Table 1: min 171, max 805, average 547 (the mean is 547.95: the paper truncates)
    assert (min(words), max(words), round(sum(words) / len(words))) == (171, 805, 548)
    assert Counter(i.severity for i in text) == {"critical": 161, "info": 70, "warning": 57}
    # without the images (not in the metadata release) every image record is left out and counted
    assert len(image) + len(loaded.left_out) == 128
    if len(image) == 128:  # the user's folder has the images and counts: Table 1 image lengths 1..4, mean 2.2
        counts = [i.n_images for i in image]
        assert (min(counts), max(counts), round(sum(counts) / 128, 1)) == (1, 4, 2.2)
    assert all(i.severity is not None for i in image)  # every image knowledge point has a text record
