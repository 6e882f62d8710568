"""PaSBench's image set: sub-image counts of upstream's composite images from the person-edited count file
(pasbench.data.sub_images) and its one-line errors, the count in the prompt and in Figure 11, the paper
config's one-line stop when the images are absent and its text-only opt-in, the image figures' "image set not
loaded", and the paper config's parameters for reasoning / thinking models (sent as the LLM layer sends them,
and counted by `aura estimate`).

Every folder, image and count file is written here (the images: tiny PNGs drawn with Pillow; the counts are
not read from the pixels). Expected values are derived by hand next to each assertion.

The fixture folder (upstream layout, no source.txt: source upstream) has 2 text records and 3 image records:
  image-0000  "a.png"  one file: an upstream composite      (count file: 2 sub-images)
  image-0001  "b.png"  one file: an upstream composite      (count file: 4)
  image-0002  "c.png"  split files c_1.png, c_2.png, c_3.png (3 files; the count file must say 3)
"""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pandas as pd
import pytest
from PIL import Image

from aura.cli import main
from aura.config import UserError, load_config, validate_config
from aura.families.pasbench import REPORTS
from aura.families.pasbench import metrics as M
from aura.families.pasbench import stats as S
from aura.families.pasbench.data import (IMAGE_FILE, SEVERITY_FILE, TEXT_FILE, PasDataError, PasItem, load_items,
                                         run_items)
from aura.families.pasbench.respond import deterministic_params, observation_request, sampling_params
from aura.pipeline.context import StageContext
from aura.pipeline.stage_args import parse_paths
from aura.prompts import get_prompt
from conftest import REPO, base_config, load_available

PAPER = REPO / "config" / "pasbench.yaml"
NAMES = ["a.png", "b.png", "c.png"]
COUNTS = {"image-0000": 2, "image-0001": 4, "image-0002": 3}


def _rec(k: str, inp: str) -> dict:
    return {"safety_knowledge": f"knowledge {k}", "condition_or_scenario": f"condition {k}",
            "risk_reason": f"reason {k}", "risk_triggering_behavior": f"trigger {k}", "input": inp}


def _png(path: Path, size=(12, 8), color=(30, 120, 200)) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", size, color).save(path)
    return path


def folder(root: Path, images: bool = True) -> Path:
    """The fixture folder above; `images=False`: no image folder at all (upstream's metadata download)."""
    root.mkdir(parents=True, exist_ok=True)
    text = [_rec("A", "[LOG START]\nLee leaves a pan on the stove.\n[LOG END]"),
            _rec("B", "[LOG START]\nLee picks wild mushrooms.\n[LOG END]")]
    sev = [{"safety_knowledge": r["safety_knowledge"], "severity": "critical"} for r in text]
    recs = [_rec("A", "a.png"), _rec("B", "b.png"), _rec("C", "c.png")]
    for name, data in ((TEXT_FILE, text), (SEVERITY_FILE, sev), (IMAGE_FILE, recs)):
        (root / name).write_text(json.dumps(data), encoding="utf-8")
    if images:
        _png(root / "images" / "a.png", (24, 8))  # two panels side by side
        _png(root / "images" / "b.png", (24, 16))  # a 2 x 2 grid
        for k in (1, 2, 3):
            _png(root / "images" / f"c_{k}.png")
    return root


def counts_file(path: Path, text: str | None = None, counts: dict | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if text is None:
        text = "item_id,sub_images\n" + "".join(f"{k},{v}\n" for k, v in (counts or COUNTS).items())
    path.write_text(text, encoding="utf-8")
    return path


def images_of(items) -> list:
    return [i for i in items if i.modality == "image"]


# ---------------------------------------------------------------------------------------------
# sub-image counts from the count file


def test_counts_come_from_the_count_file_and_split_files(tmp_path):
    root = folder(tmp_path / "pas")
    items = images_of(load_items(root, sub_images=counts_file(tmp_path / "n.csv")))
    assert [i.item_id for i in items] == ["image-0000", "image-0001", "image-0002"]
    assert [len(i.images) for i in items] == [1, 1, 3]  # files sent: a composite each, then 3 split files
    assert [i.n_images for i in items] == [2, 4, 3]  # sub-images: the count file's 2 and 4, the 3 split files
    # mean over the three: (2 + 4 + 3) / 3 = 3.0 (the paper's Table 1 reports 2.2 over its 128)
    assert sum(i.n_images for i in items) / 3 == 3.0


def test_the_count_file_takes_comments_a_bom_blank_lines_and_image_and_note_columns(tmp_path):
    root = folder(tmp_path / "pas")
    text = ("\ufeffitem_id,sub_images,image,note\n# counted by hand from combine_images\n\n"
            "image-0002,3,c.png,\nimage-0000, 2 ,a.png,two panels\nimage-0001,4,,\n")
    items = images_of(load_items(root, sub_images=counts_file(tmp_path / "n.csv", text)))
    assert [i.n_images for i in items] == [2, 4, 3]  # rows in any order; a blank image cell is not checked


def test_a_demo_folders_single_file_is_one_image_unless_counted(tmp_path):
    root = folder(tmp_path / "pas")
    (root / "source.txt").write_text("demo\n")  # our own sets store one file per sub-image
    assert [i.n_images for i in images_of(load_items(root))] == [1, 1, 3]
    counted = load_items(root, sub_images=counts_file(tmp_path / "n.csv"))
    assert [i.n_images for i in images_of(counted)] == [2, 4, 3]


def test_a_composite_item_row_is_a_valid_contract_row():
    row = dict(item_id="image-0007", modality="image", index=7, safety_knowledge="k", condition="c",
               risk_reason="r", trigger="t", log=None, images=["7.png"], n_images=3, severity=None, words=None,
               source="upstream")
    assert PasItem(**row).n_images == 3  # one composite file of 3 sub-images
    for bad in ({"n_images": 5}, {"n_images": 0}, {"images": ["7_1.png", "7_2.png"], "n_images": 3}):
        with pytest.raises(ValueError, match="1-4 images"):
            PasItem(**{**row, **bad})


# ---------------------------------------------------------------------------------------------
# the count file's one-line errors: the file and the row (the header is row 1)


def _error(fn, *args, **kwargs) -> str:
    with pytest.raises(PasDataError) as ei:
        fn(*args, **kwargs)
    msg = str(ei.value)
    assert "\n" not in msg and isinstance(ei.value, UserError)  # the CLI prints it as one line, exit 2
    return msg


@pytest.mark.parametrize("text, expected", [
    ("item_id,sub_images\nimage-0000,2\nimage-0009,1\nimage-0001,4\nimage-0002,3\n",
     "row 3: unknown item_id 'image-0009' (the image records of multi_modal_eval_hugging.json are image-0000 to "
     "image-0002)"),
    ("item_id,sub_images\nimage-0000,2\nimage-0001,4\nimage-0000,2\nimage-0002,3\n",
     "row 4: item_id image-0000 again (first at row 2)"),
    ("item_id,sub_images\nimage-0000,5\nimage-0001,4\nimage-0002,3\n",
     "row 2 (image-0000): sub_images '5' is not a whole number from 1 to 4"),
    ("item_id,sub_images\nimage-0000,0\nimage-0001,4\nimage-0002,3\n",
     "row 2 (image-0000): sub_images '0' is not a whole number from 1 to 4"),
    ("item_id,sub_images\nimage-0000,2\nimage-0001,\nimage-0002,3\n",
     "row 3 (image-0001): sub_images '' is not a whole number from 1 to 4"),
    ("item_id,sub_images\nimage-0000,2\nimage-0001,two\nimage-0002,3\n",
     "row 3 (image-0001): sub_images 'two' is not a whole number from 1 to 4"),
    ("item_id,sub_images,image\nimage-0000,2,b.png\nimage-0001,4,b.png\nimage-0002,3,c.png\n",
     "row 2 (image-0000): image 'b.png' is not that record's input 'a.png'"),
    ("item_id,sub_images\nimage-0000,2\nimage-0002,3\n",
     "no row for image-0001 (multi_modal_eval_hugging.json index 1, b.png); 1 image record(s) without a row"),
    ("item,count\nimage-0000,2\n", "row 1: the header lacks item_id, sub_images"),
    ("", "empty: expected the header item_id,sub_images"),
])
def test_count_file_errors_name_the_file_and_row(tmp_path, text, expected):
    path = counts_file(tmp_path / "n.csv", text)
    msg = _error(load_items, folder(tmp_path / "pas"), sub_images=path)
    assert msg.startswith(f"{path}: {expected}"), msg


def test_split_files_that_disagree_with_the_count_file(tmp_path):
    path = counts_file(tmp_path / "n.csv", counts={**COUNTS, "image-0002": 2})
    msg = _error(load_items, folder(tmp_path / "pas"), sub_images=path)
    assert msg.startswith(f"{path}: image-0002: sub_images 2, but 3 sub-image files (c_1.png ... c_3.png) are under ")


def test_a_composite_without_a_count_file_and_a_missing_count_file(tmp_path):
    root = folder(tmp_path / "pas")
    msg = _error(load_items, root)
    assert msg.startswith(f"{root / IMAGE_FILE}: record at index 0: a.png is one upstream composite of 1-4 "
                          "sub-images, whose number comes from the count file pasbench.data.sub_images (not set): "
                          f"make it with `python scripts/pasbench_sub_images.py {root} <counts.csv>`")
    missing = tmp_path / "nowhere.csv"
    msg = _error(load_items, root, sub_images=missing)
    assert msg == (f"{missing}: the sub-image count file (pasbench.data.sub_images) does not exist; make it with "
                   f"`python scripts/pasbench_sub_images.py {root} {missing}` (one row per image record) and write "
                   "each composite's number of panels (1-4) in its sub_images cell (--detect fills in those its "
                   "layout settles), or set pasbench.data.sub_images: detect to read them from the layouts")


def test_the_template_script_writes_one_row_per_record_and_its_blanks_are_refused(tmp_path, capsys):
    spec = importlib.util.spec_from_file_location("sub_images", REPO / "scripts" / "pasbench_sub_images.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    root, out = folder(tmp_path / "pas"), tmp_path / "cfg" / "counts.csv"
    assert script.main([str(root), str(out)]) == 0
    assert out.read_text() == ("item_id,sub_images,image,note\nimage-0000,,a.png,\nimage-0001,,b.png,\n"
                               "image-0002,,c.png,\n")
    assert script.main([str(root), str(out)]) == 2  # never overwrites a file a person may have filled in
    assert "exists" in capsys.readouterr().err
    assert _error(load_items, root, sub_images=out).startswith(
        f"{out}: row 2 (image-0000): sub_images '' is not a whole number from 1 to 4")
    out.write_text(out.read_text().replace("image-0000,,", "image-0000,2,").replace("image-0001,,", "image-0001,4,")
                   .replace("image-0002,,", "image-0002,3,"))
    assert [i.n_images for i in images_of(load_items(root, sub_images=out))] == [2, 4, 3]


# ---------------------------------------------------------------------------------------------
# the count reaches the prompt and Figure 11


def test_the_prompt_says_the_sub_image_count_and_sends_the_one_composite(tmp_path):
    root = folder(tmp_path / "pas")
    raw = base_config("http://127.0.0.1:9/v1", tmp_path / "cache")
    raw["models"]["v"] = {**raw["models"]["m"], "model_id": "seeing", "vision": True}
    config = validate_config(raw)
    item = images_of(load_items(root, sub_images=counts_file(tmp_path / "n.csv")))[1]  # b.png: 4 sub-images
    prompts = {"text": get_prompt("proactive_text"), "image": get_prompt("proactive_image")}
    req = observation_request(item.model_dump(), prompts, config)
    parts = req.messages[-1]["content"]
    texts = [p["text"] for p in parts if p["type"] == "text"]
    assert texts == ["What you observed (4 picture(s), in time order):"]  # the count, not its 1 file
    assert sum(p["type"] == "image_url" for p in parts) == 1  # the composite goes as it is, one image


def test_figure_11_groups_by_the_sub_image_count(tmp_path):
    root = folder(tmp_path / "pas")
    items = load_items(root, sub_images=counts_file(tmp_path / "n.csv"))
    # model a, 2 samples per image item: image-0000 (2 sub-images) detected twice, image-0001 (4) never,
    # image-0002 (3 split files) once
    hits = {"image-0000": [True, True], "image-0001": [False, False], "image-0002": [True, False]}
    judgments = pd.DataFrame([{"item_id": k, "model": "a", "sample": s, "modality": "image", "status": "ok",
                               "detected": d} for k, ds in hits.items() for s, d in enumerate(ds)])
    frame = pd.DataFrame([i.model_dump() for i in items])
    table = M.image_count(M.item_counts(judgments), frame, n_resamples=20, seed=0).set_index("n_images")
    assert table.loc[[1, 2, 3, 4], "n_items"].tolist() == [0, 1, 1, 1]  # with n_images = 1 all 3 would be at 1
    assert table.loc[2, "avg_of_n"] == 1.0 and table.loc[3, "avg_of_n"] == 0.5 and table.loc[4, "avg_of_n"] == 0.0
    assert table.loc[[2, 3], "in_paper"].tolist() == [True, True] and not table.loc[4, "in_paper"]


# ---------------------------------------------------------------------------------------------
# the paper config: one line when the images are absent, text_only to run without them


def paper(tmp_path, **data) -> object:
    """config/pasbench.yaml as it is, its data section overridden only by `data`."""
    return load_config(PAPER, {"pasbench": {"data": data}} if data else None)


def items_ctx(config, data_dir: Path, out: Path) -> StageContext:
    return StageContext(stage="pasbench-items", config=config, inputs=parse_paths([f"data_dir={data_dir}"], "--in"),
                        outputs=parse_paths([f"items={out}"], "--out"))


def test_the_paper_config_asks_for_the_images_and_their_counts():
    data = paper(None).raw["pasbench"]["data"]
    assert data["images_required"] is True and data["text_only"] is False  # no silent text-only run
    assert data["sub_images"] == "config/pasbench_sub_images.csv"  # the user's count file


def test_the_paper_config_stops_with_one_line_when_the_images_are_absent(tmp_path):
    root = folder(tmp_path / "pas", images=False)
    out = tmp_path / "items.jsonl"
    msg = _error(run_items, items_ctx(paper(tmp_path), root, out))
    assert msg == (f"{root / IMAGE_FILE}: image set not loaded: none of its 3 images (e.g. a.png) is there (no "
                   f"{root / 'images'} or {root / 'combine_images'} folder); unzip upstream's combine_images.zip into "
                   f"{root / 'images'} (or point pasbench.data.images at its folder), or set pasbench.data.text_only: "
                   "true to run the text set alone")
    assert not out.exists()
    # the CLI: the same line after "error: pasbench-items: ", exit 2, nothing written
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"extends: {PAPER}\n")
    assert main(["pasbench-items", "--configfile", str(cfg), "--in", f"data_dir={root}", "--out", f"items={out}"]) == 2
    assert not out.exists()


def test_the_paper_config_with_images_but_no_count_file_says_how_to_make_it(tmp_path):
    root, missing = folder(tmp_path / "pas"), tmp_path / "pasbench_sub_images.csv"
    msg = _error(run_items, items_ctx(paper(tmp_path, sub_images=str(missing)), root, tmp_path / "items.jsonl"))
    assert msg.startswith(f"{missing}: the sub-image count file (pasbench.data.sub_images) does not exist; make it "
                          f"with `python scripts/pasbench_sub_images.py {root} {missing}`")


def test_text_only_runs_the_text_set_and_says_the_image_set_is_not_loaded(tmp_path):
    root = folder(tmp_path / "pas", images=False)
    out = tmp_path / "items.jsonl"
    run_items(items_ctx(paper(tmp_path, text_only=True), root, out))
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["item_id"] for r in rows] == ["text-0000", "text-0001"]
    prov = json.loads(Path(f"{out}.prov.json").read_text())
    assert (prov["images_left_out"], prov["text_only"], prov["items"]) == (3, True, {"text": 2, "image": 0})
    assert prov["image_set"] == {"loaded": False, "image_items": 0,
                                 "note": "image set not loaded (pasbench.data.text_only: true)"}
    # with the images there, text_only still leaves every image record out (an explicit text-only run)
    run_items(items_ctx(paper(tmp_path, text_only=True), folder(tmp_path / "full"), out))
    assert {json.loads(line)["modality"] for line in out.read_text().splitlines()} == {"text"}


def test_the_paper_config_loads_the_images_with_their_counts(tmp_path):
    root, out = folder(tmp_path / "pas"), tmp_path / "items.jsonl"
    path = counts_file(tmp_path / "n.csv")
    run_items(items_ctx(paper(tmp_path, sub_images=str(path)), root, out))
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(r["item_id"], r["n_images"]) for r in rows if r["modality"] == "image"] == \
        [("image-0000", 2), ("image-0001", 4), ("image-0002", 3)]
    prov = json.loads(Path(f"{out}.prov.json").read_text())
    assert prov["image_set"] == {"loaded": True, "image_items": 3, "note": ""}
    assert prov["sub_images"]["path"] == str(path) and prov["sub_images"]["rows"] == 3
    assert len(prov["sub_images"]["sha256"]) == 64


# ---------------------------------------------------------------------------------------------
# the image figures say "image set not loaded" (rendered with papermill, as `aura render` does)

IMAGE_FIGURES = ["pasbench_fig3_image_rates", "pasbench_fig11_image_count", "pasbench_fig7_k_curves",
                 "pasbench_fig8_pearson_models", "pasbench_fig9_pearson_samples", "pasbench_table2_reactive"]


def stats_run(tmp_path: Path, items_file: Path, judged: list[str]) -> dict[str, Path]:
    """pasbench-stats over `items_file` (written by pasbench-items) and model a's judgments: 2 samples per item
    in `judged`, the first detected."""
    rows = [{"item_id": i, "model": "a", "sample": s, "modality": i.split("-")[0], "status": "ok", "detected": s == 0}
            for i in judged for s in range(2)]
    jpath = tmp_path / "judgments_a.jsonl"
    jpath.write_text("".join(json.dumps(r) + "\n" for r in rows))
    # the reactive probe asked on each failed sample (sample 1), detected
    rpath = tmp_path / "reactive_a.jsonl"
    rpath.write_text("".join(json.dumps({"item_id": i, "model": "a", "sample": 1, "status": "ok", "detected": True})
                             + "\n" for i in judged))
    raw = base_config("http://127.0.0.1:9/v1", tmp_path / "cache")
    raw["pasbench"] = {"bootstrap": {"resamples": 20, "seed": 1}}
    out = tmp_path / "stats"
    ctx = StageContext(stage="pasbench-stats", config=validate_config(raw),
                       inputs={"items": items_file, "judgments_0": jpath, "reactive_0": rpath},
                       outputs={name: out / f"{name}.csv" for name in S.OUTPUTS})
    S.run(ctx)
    return {f"pasbench_stats_{name}": path for name, path in ctx.outputs.items()}


def render(name: str, paths: dict[str, Path], out: Path) -> str:
    """Render one report notebook; its outputs' text (stdout of every cell, the figure's no-data line)."""
    spec = REPORTS[name]
    args = [x for key in spec["inputs"] for x in ("-p", key, str(paths[key]))]
    if spec.get("figure", True):
        args += ["-p", "out_pdf", str(out / f"{name}.pdf"), "-p", "out_png", str(out / f"{name}.png")]
    ran = out / f"{name}.ipynb"
    out.mkdir(parents=True, exist_ok=True)
    nb = REPO / "notebooks" / "pasbench" / spec["notebook"]
    assert main(["render", str(nb), str(ran), *args, "-p", "tables_dir", str(out / "tables")]) == 0, name
    cells = json.loads(ran.read_text())["cells"]
    return "\n".join("".join(o.get("text", "")) for c in cells for o in c.get("outputs", []))


def test_image_figures_say_the_image_set_is_not_loaded(tmp_path):
    root = folder(tmp_path / "pas", images=False)
    items = tmp_path / "items.jsonl"
    run_items(items_ctx(paper(tmp_path, text_only=True), root, items))
    paths = stats_run(tmp_path, items, ["text-0000", "text-0001"])
    prov = json.loads(Path(f"{paths['pasbench_stats_image_count']}.prov.json").read_text())
    note = "image set not loaded (pasbench.data.text_only: true)"
    assert prov["image_set"] == {"loaded": False, "image_items": 0, "note": note}
    out = tmp_path / "rendered"
    for name in IMAGE_FIGURES:
        text = render(name, paths, out)
        assert note in text or name == "pasbench_table2_reactive", name  # the figure's own line
        table = (out / "tables" / f"{name}.md").read_text()
        assert note in table, name  # and the table's notes
        if REPORTS[name].get("figure", True):
            assert (out / f"{name}.pdf").stat().st_size > 0
    t2 = pd.read_csv(out / "tables" / "pasbench_table2_reactive.csv")
    assert t2["Image set"].tolist() == ["not loaded"] and t2["Text set"].tolist() == ["2/2 (100.0%)"]


def test_figure_11_with_the_image_set_draws_the_counts_and_no_note(tmp_path):
    root, items = folder(tmp_path / "pas"), tmp_path / "items.jsonl"
    run_items(items_ctx(paper(tmp_path, sub_images=str(counts_file(tmp_path / "n.csv"))), root, items))
    paths = stats_run(tmp_path, items, ["text-0000", "image-0000", "image-0001", "image-0002"])
    out = tmp_path / "rendered"
    text = render("pasbench_fig11_image_count", paths, out)
    assert "image set not loaded" not in text
    table = pd.read_csv(out / "tables" / "pasbench_fig11_image_count.csv")
    # one item each at 2, 3 and 4 sub-images (a.png: 2, c_1..3: 3, b.png: 4), none at 1; each c/n = 1/2
    assert dict(zip(table["Sub-images"], table["Items"].astype(str))) == {
        "1 image": "0", "2 images": "1", "3 images": "1", "4 images": "1"}
    assert table.set_index("Sub-images").loc["3 images", "Accuracy (Average-of-N)"].startswith("50.0")
    assert "image set not loaded" not in (out / "tables" / "pasbench_fig11_image_count.md").read_text()


# ---------------------------------------------------------------------------------------------
# the paper config's reasoning / thinking models: the params they take, and the estimate counts their budget

REASONING = {"o1": {"max_completion_tokens": 8192}, "o1-mini": {"max_completion_tokens": 8192}}
# the paper's sampling with a larger budget: Gemini 2.5 thinks by default; DeepSeek-R1 runs from its weights on
# vLLM, which honours temperature / top_p (and its seed: seed + sample, as every seeded model)
THINKING = {"gemini-2.5-pro": {"temperature": 0.7, "top_p": 0.9, "max_tokens": 8192},
            "gemini-2.5-flash": {"temperature": 0.7, "top_p": 0.9, "max_tokens": 8192},
            "deepseek-r1": {"temperature": 0.7, "top_p": 0.9, "max_tokens": 8192}}
SEEDED = {"deepseek-r1": 42}
# retired since the paper (unavailable in the paper config): made available again to test their params
RETIRED = ("o1", "o1-mini", "gemini-2.5-pro", "gemini-2.5-flash")


def sent(config, model: str, params: dict, cache: Path) -> dict:
    """The params of the chat call as the LLM layer builds it (`LLMClient.prepare`, the call path's own)."""
    from aura.llm import Cache, LLMClient, LLMRequest

    client = LLMClient(config, Cache(cache))
    req = LLMRequest(item_id="x", messages=[{"role": "user", "content": "hi"}], prompt_name="t", prompt_sha256="0",
                     params=params)
    return client.prepare(model, req)[1]


def test_reasoning_models_get_only_the_params_they_take(tmp_path):
    assert paper(tmp_path).raw["pasbench"]["model_params"] == {**REASONING, **THINKING}
    assert not set(RETIRED) & set(paper(tmp_path).raw["pasbench"]["evaluated"])  # the paper config leaves them out
    config = load_available(PAPER, *RETIRED)
    assert config.raw["pasbench"]["model_params"] == {**REASONING, **THINKING}
    for model, expected in {**REASONING, **THINKING}.items():
        assert model in config.raw["pasbench"]["evaluated"]
        for s in (0, 5):  # every sample: only DeepSeek-R1 (vLLM) of these has a seed, seed + sample
            seed = {"seed": SEEDED[model] + s} if model in SEEDED else {}
            assert sent(config, model, sampling_params(config, model, s), tmp_path) == {**seed, **expected}, model
    for model in ("o1", "o1-mini"):  # OpenAI's reasoning models: no temperature / top_p / max_tokens, ever
        for params in (sampling_params(config, model, 0), deterministic_params(config, model)):
            assert sent(config, model, params, tmp_path) == {"max_completion_tokens": 8192}, model
    # the probes answered at temperature 0: the thinking models keep their budget, o1 takes no temperature
    assert deterministic_params(config, "gemini-2.5-pro") == {"max_tokens": 8192, "temperature": 0.0}
    assert deterministic_params(config, "deepseek-r1") == {"max_tokens": 8192, "temperature": 0.0}
    # every other model as before: the paper's sampling, 1024 tokens, seed + sample where seeded
    assert sent(config, "gpt-4.1", sampling_params(config, "gpt-4.1", 3), tmp_path) == {
        "seed": 45, "temperature": 0.7, "top_p": 0.9, "max_tokens": 1024}
    assert deterministic_params(config, "gpt-4.1") == {"temperature": 0.0}


def test_a_model_params_entry_for_an_unknown_model_is_one_line(tmp_path):
    from aura.config import ConfigError

    with pytest.raises(ConfigError) as ei:
        load_config(PAPER, {"pasbench": {"model_params": {"o9": {"max_completion_tokens": 10}}}})
    assert "pasbench.model_params: unknown model 'o9' (not under models:)" in str(ei.value)
    assert "\n" not in str(ei.value)


def test_the_estimate_prices_reasoning_models_at_their_budget(tmp_path):
    """Nothing produced (paths under tmp_path, no data folder): projected from the download's counts, 288 text
    and 128 image items, N = 16 (Gemini-2.5-pro: 128 on the image set); o1, o1-mini and Gemini 2.5, retired since
    the paper, made available again (RETIRED) so their pricing stays tested. Completions per call: the config's
    estimate.reasoning_tokens name all five reasoning / thinking models, so the answer size plus that assumption
    (o1: 300 + 2000, o1-mini 300 + 2000 (text only: no vision), Gemini-2.5-pro 300 + 2000), within their 8192
    budget; GPT-4.1 min(300, 1024) = 300. Without an assumption: the whole budget (8192, an upper bound)."""
    from aura.estimate import estimate

    paths = {k: str(tmp_path / k) for k in ("interim", "processed", "results", "figures", "logs")}
    none = {"download": {"dest": str(tmp_path / "none")}}
    config = load_available(PAPER, *RETIRED, overrides={"paths": paths, "pasbench": {"data": none}})
    lines = estimate(config)
    respond = {ln.model: ln for ln in lines if ln.stage == "pasbench-respond"}
    assert respond["o1"].calls == 16 * (288 + 128) and respond["o1"].tokens_out == respond["o1"].calls * (300 + 2000)
    assert respond["o1-mini"].calls == 16 * 288 and respond["o1-mini"].tokens_out == 16 * 288 * (300 + 2000)
    assert respond["gemini-2.5-pro"].tokens_out == respond["gemini-2.5-pro"].calls * (300 + 2000)
    assert respond["gpt-4.1"].tokens_out == respond["gpt-4.1"].calls * 300 and respond["gpt-4.1"].reasoning_each is None
    know = {ln.model: ln for ln in lines if ln.stage == "pasbench-knowledge"}
    assert know["o1"].tokens_out == know["o1"].calls * (200 + 2000)  # its reasoning is spent on the probes too
    # in pasbench.evaluated's order: the paper config's (deepseek-r1), then the retired ones made available again
    assert lines.note.endswith("; deepseek-r1, o1, o1-mini, gemini-2.5-pro, gemini-2.5-flash: completions at the "
                               "stage's answer size plus estimate.reasoning_tokens per call, within their "
                               "pasbench.model_params budget (not the whole budget)")
    # a model the assumption does not name keeps the whole budget (an upper bound), and the note says so
    config.raw["estimate"]["reasoning_tokens"].pop("o1")
    lines = estimate(config)
    o1 = next(ln for ln in lines if ln.stage == "pasbench-respond" and ln.model == "o1")
    assert o1.tokens_out == o1.calls * 8192 and o1.reasoning_each is None
    assert "; o1: completions at their pasbench.model_params budget (reasoning tokens are billed as output: an " \
           "upper bound)" in lines.note
    # text_only: the image items are not asked (o1: 16 x 288)
    config = load_available(PAPER, *RETIRED, overrides={"paths": paths, "pasbench": {"data": {
        "text_only": True, "download": {"dest": str(tmp_path / "none")}}}})
    respond = {ln.model: ln for ln in estimate(config) if ln.stage == "pasbench-respond"}
    assert respond["o1"].calls == 16 * 288
