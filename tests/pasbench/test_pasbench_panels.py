"""Sub-image counts read from a composite's layout (pasbench.data.sub_images: detect, and the count-file
script's --detect), on composites drawn here.

Each panel is a drawn "scene": a vertical colour gradient, smooth noise (a random 1/8-size field scaled up
bicubically) and six filled discs, blurred by one pixel, so it has soft edges everywhere and no straight
full-length one. Composites put scenes together the two ways a script does: edge to edge (equal sizes) or
with a white gutter. The expected count of each is the number of scenes pasted, known by construction.
"""
from __future__ import annotations

import csv
import importlib.util
import io
import json
import random
from pathlib import Path

import numpy as np
import pytest
from PIL import Image, ImageDraw, ImageFilter

from aura.families.pasbench.data import IMAGE_FILE, SEVERITY_FILE, TEXT_FILE, PasDataError, load_items, read_folder
from aura.families.pasbench.panels import detect
from conftest import REPO


def scene(seed: int, size=(160, 160)) -> Image.Image:
    rng = random.Random(seed)
    w, h = size
    top, bottom = (np.array([rng.randrange(256) for _ in range(3)], float) for _ in range(2))
    t = np.linspace(0, 1, h)[:, None, None]
    noise = np.random.default_rng(seed).normal(128, 25, (max(1, h // 8), max(1, w // 8), 3))
    noise = np.asarray(Image.fromarray(np.clip(noise, 0, 255).astype(np.uint8)).resize((w, h), Image.BICUBIC), float)
    img = Image.fromarray(np.clip((top * (1 - t) + bottom * t) + noise - 128, 0, 255).astype(np.uint8))
    draw = ImageDraw.Draw(img)
    for _ in range(6):
        x, y, r = rng.randrange(w), rng.randrange(h), rng.randrange(8, 40)
        draw.ellipse([x - r, y - r, x + r, y + r], fill=tuple(rng.randrange(256) for _ in range(3)))
    return img.filter(ImageFilter.GaussianBlur(1))


def row(panels, gap=0) -> Image.Image:
    out = Image.new("RGB", (sum(p.width for p in panels) + gap * (len(panels) - 1), max(p.height for p in panels)),
                    "white")
    x = 0
    for p in panels:
        out.paste(p, (x, 0))
        x += p.width + gap
    return out


def column(panels, gap=0) -> Image.Image:
    return row([p.transpose(Image.Transpose.TRANSPOSE) for p in panels], gap).transpose(Image.Transpose.TRANSPOSE)


def jpeg(img: Image.Image) -> Image.Image:
    buf = io.BytesIO()
    img.save(buf, "JPEG", quality=85)
    return Image.open(io.BytesIO(buf.getvalue())).convert("RGB")


def framed(img: Image.Image, border=10) -> Image.Image:
    out = Image.new("RGB", (img.width + 2 * border, img.height + 2 * border), "white")
    out.paste(img, (border, border))
    return out


WHITE = Image.new("RGB", (160, 160), "white")
COMPOSITES = {  # name: (image, panels pasted)
    "two side by side": (row([scene(2), scene(3)]), 2),
    "three side by side": (row([scene(4), scene(5), scene(6)]), 3),
    "four side by side": (row([scene(s) for s in (7, 8, 9, 10)]), 4),
    "two stacked": (column([scene(11), scene(12)]), 2),
    "a 2 x 2 grid": (column([row([scene(13), scene(14)]), row([scene(15), scene(16)])]), 4),
    "three in a 2 x 2 grid, the fourth place empty": (column([row([scene(17), scene(18)]), row([scene(19), WHITE])]), 3),
    "three with gutters": (row([scene(20), scene(21), scene(22)], gap=8), 3),
    "two of unequal widths with a gutter": (row([scene(23, (120, 160)), scene(24, (200, 160))], gap=6), 2),
    "two inside a plain frame": (framed(row([scene(25), scene(26)])), 2),
    "three side by side, saved as JPEG": (jpeg(row([scene(27), scene(28), scene(29)])), 3),
}


@pytest.mark.parametrize("name", list(COMPOSITES))
def test_the_layout_gives_the_number_of_panels_pasted(tmp_path, name):
    img, panels = COMPOSITES[name]
    path = tmp_path / "c.png"
    img.save(path)
    layout = detect(path)
    assert layout.count == panels, layout.how


def textured(img: Image.Image, sd: float, seed: int) -> Image.Image:
    """A photograph-like panel: the scene with per-pixel noise of standard deviation ``sd`` (sensor grain)."""
    a = np.asarray(img, float) + np.random.default_rng(seed).normal(0, sd, (img.height, img.width, 3))
    return Image.fromarray(np.clip(a, 0, 255).astype(np.uint8))


@pytest.mark.parametrize("sd", [16, 24, 32])
def test_textured_panels_butted_are_in_doubt_and_with_gutters_counted(tmp_path, sd):
    # butted edge to edge, the seam is no sharp step beside the grain (the old detector read "1: no cut"),
    # but it stands out of the steps' spread: no count, in doubt
    butted = {"two": row([textured(scene(50), sd, 1), textured(scene(51), sd, 2)]),
              "three": row([textured(scene(s), sd, s) for s in (52, 53, 54)]),
              "2 x 2": column([row([textured(scene(55), sd, 5), textured(scene(56), sd, 6)]),
                               row([textured(scene(57), sd, 7), textured(scene(58), sd, 8)])])}
    for name, img in butted.items():
        img.save(tmp_path / "b.png")
        layout = detect(tmp_path / "b.png")
        assert layout.count is None and layout.how, (sd, name, layout.how)  # in doubt, with the reason
    # one textured picture alone: no cut anywhere, which butted panels without a visible seam would also show
    textured(scene(59), sd, 9).save(tmp_path / "one.png")
    one = detect(tmp_path / "one.png")
    assert one.count is None and one.how.endswith("in doubt"), one.how
    # the same textured panels with a plain gutter: the gutters settle the count
    for panels, img in ((2, row([textured(scene(60), sd, 1), textured(scene(61), sd, 2)], gap=8)),
                        (3, row([textured(scene(s), sd, s) for s in (62, 63, 64)], gap=6)),
                        (4, column([row([textured(scene(65), sd, 5), textured(scene(66), sd, 6)], gap=8),
                                    row([textured(scene(67), sd, 7), textured(scene(68), sd, 8)], gap=8)], gap=8))):
        img.save(tmp_path / "g.png")
        layout = detect(tmp_path / "g.png")
        assert layout.count == panels, (sd, panels, layout.how)


def test_one_scene_alone_is_in_doubt(tmp_path):
    scene(1).save(tmp_path / "one.png")
    layout = detect(tmp_path / "one.png")
    assert layout.count is None
    assert layout.how == ("no cut along the width; no cut along the height: one picture, or panels butted without "
                          "a visible seam: in doubt")


def test_a_layout_in_doubt_gives_no_count_and_says_why(tmp_path):
    # two panels butted edge to edge at unequal widths (120 + 200): a seam at x = 120, not at 1/2, 1/3 or 1/4 of 320
    row([scene(30, (120, 160)), scene(31, (200, 160))]).save(tmp_path / "unequal.png")
    layout = detect(tmp_path / "unequal.png")
    assert layout.count is None
    assert layout.how == "seams along the width at [120]: not at one equal division of the side"
    # three panels that are no grid: a tall one beside two stacked ones, and two over one wide one; the seam
    # between the stacked ones runs through one column only, so there is no count (not 4 cells of a grid)
    tall = row([scene(38, (160, 320)), column([scene(39), scene(40)])])
    wide = column([row([scene(41), scene(42)]), scene(43, (320, 160))])
    for name, img in (("tall", tall), ("wide", wide)):
        img.save(tmp_path / f"{name}.png")
        layout = detect(tmp_path / f"{name}.png")
        assert layout.count is None and layout.how.endswith("not a grid"), (name, layout.how)
    # a 3 x 2 grid holds 6 panels, more than an item has (1-4)
    column([row([scene(s) for s in (32, 33, 34)]), row([scene(s) for s in (35, 36, 37)])]).save(tmp_path / "six.png")
    six = detect(tmp_path / "six.png")
    assert six.count is None and six.how.startswith("6 panels (") and six.how.endswith("expected 1-4")


# ---------------------------------------------------------------------------------------------
# the loader (sub_images: detect) and the count-file script (--detect)


def _folder(root: Path, images: dict[str, Image.Image]) -> Path:
    """An upstream-layout folder: one text record and one image record per entry of ``images``."""
    root.mkdir(parents=True)
    rec = lambda k, inp: {"safety_knowledge": f"knowledge {k}", "condition_or_scenario": "c", "risk_reason": "r",
                          "risk_triggering_behavior": "t", "input": inp}
    (root / TEXT_FILE).write_text(json.dumps([rec("T", "[LOG START]\nx\n[LOG END]")]), encoding="utf-8")
    (root / SEVERITY_FILE).write_text(json.dumps([{"safety_knowledge": "knowledge T", "severity": "info"}]),
                                      encoding="utf-8")
    (root / IMAGE_FILE).write_text(json.dumps([rec(n, n) for n in images]), encoding="utf-8")
    (root / "images").mkdir()
    for name, img in images.items():
        img.save(root / "images" / name)
    return root


def test_the_loader_reads_each_composites_count_from_its_layout(tmp_path):
    root = _folder(tmp_path / "pas", {"a.png": COMPOSITES["two side by side"][0],
                                      "b.png": COMPOSITES["three with gutters"][0],
                                      "c.png": COMPOSITES["a 2 x 2 grid"][0]})
    loaded = read_folder(root, sub_images="detect")
    assert [(i.item_id, i.n_images, len(i.images)) for i in loaded.items if i.modality == "image"] == [
        ("image-0000", 2, 1), ("image-0001", 3, 1), ("image-0002", 4, 1)]  # one composite file each
    assert loaded.sub_images == {"path": "detect", "detected": 3,
                                 "counts": {"image-0000": 2, "image-0001": 3, "image-0002": 4}}


def test_a_composite_the_layout_does_not_settle_stops_the_loader_with_the_way_out(tmp_path):
    root = _folder(tmp_path / "pas", {"a.png": COMPOSITES["two stacked"][0],
                                      "b.png": row([scene(42, (120, 160)), scene(43, (200, 160))])})
    with pytest.raises(PasDataError) as ei:
        load_items(root, sub_images="detect")
    assert str(ei.value) == (
        f"{root / IMAGE_FILE}: record at index 1: {root / 'images' / 'b.png'}: its number of sub-images cannot be "
        "read from its layout (seams along the width at [120]: not at one equal division of the side); set "
        "pasbench.data.sub_images to a count file instead: `python scripts/pasbench_sub_images.py --detect "
        f"{root} <counts.csv>` fills in the counts the layout settles and leaves this one blank for you")


def test_the_script_fills_in_what_the_layout_settles_and_leaves_the_rest_to_a_person(tmp_path, capsys):
    spec = importlib.util.spec_from_file_location("sub_images", REPO / "scripts" / "pasbench_sub_images.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    root = _folder(tmp_path / "pas", {"a.png": COMPOSITES["a 2 x 2 grid"][0],
                                      "b.png": row([scene(44, (120, 160)), scene(45, (200, 160))])})
    out = tmp_path / "counts.csv"
    assert script.main([str(root), str(out), "--detect"]) == 0
    assert "2 rows, 1 counted from the layout, 1 blank" in capsys.readouterr().out
    rows = list(csv.DictReader(out.open(encoding="utf-8")))
    assert [(r["item_id"], r["sub_images"], r["image"]) for r in rows] == [("image-0000", "4", "a.png"),
                                                                           ("image-0001", "", "b.png")]
    assert rows[0]["note"].startswith("detected: 2 equal panels along the width")
    assert rows[1]["note"] == "count by hand: seams along the width at [120]: not at one equal division of the side"
    with pytest.raises(PasDataError, match=r"row 3 \(image-0001\): sub_images '' is not a whole number"):
        load_items(root, sub_images=out)  # the blank is refused until a person fills it in
    out.write_text(out.read_text(encoding="utf-8").replace("image-0001,,", "image-0001,2,"), encoding="utf-8")
    assert [i.n_images for i in load_items(root, sub_images=out) if i.modality == "image"] == [4, 2]
