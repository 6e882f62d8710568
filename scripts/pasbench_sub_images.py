"""Write the template of PaSBench's sub-image count file (``pasbench.data.sub_images``).

Upstream ships each image item as ONE composite image of 1-4 sub-images (``combine_images.zip``); how many is
not in the file. This writes one row per image record of ``<folder>/multi_modal_eval_hugging.json``::

    item_id,sub_images,image,note
    image-0000,,115.png,
    image-0001,,154.png,
    ...

``item_id`` is the item the loader makes of record i (``image-<i:04d>``), ``image`` the record's file name (the
loader checks it), and ``sub_images`` is left blank: open each composite and write its number of panels (1-4).
The loader refuses the file while a cell is blank, naming the file and the row.

``--detect`` fills in the count of each composite whose layout settles it (``aura.families.pasbench.panels``:
plain gutters between the panels, or seams at equal divisions), with ``note`` saying what was seen, and leaves
the others blank with the reason; look at the composites all the same, since a count read from pixels is a
proposal until a person has checked it. The images are looked up in ``<folder>/images`` (else
``<folder>/combine_images``; ``--images`` names another folder).

    python scripts/pasbench_sub_images.py data/interim/pasbench config/pasbench_sub_images.csv [--detect] [--force]
"""
from __future__ import annotations

import argparse
import csv
import io
import json
import sys
from pathlib import Path

from aura.families.pasbench.data import IMAGE_DIRS, IMAGE_FILE  # the loader's names (run with the project's venv)


def _proposal(images: Path | None, name: str) -> tuple[str, str]:
    """(count, note) for one record under --detect: the layout's count when it settles it, else blank."""
    from aura.families.pasbench.panels import detect

    path = images / name if images and name else None
    if path is None or not path.is_file():
        return "", f"no image file {name!r} to look at" if name else "the record has no input file name"
    try:
        layout = detect(path)
    except (OSError, ValueError) as exc:
        return "", f"not a readable image ({exc})"
    return (str(layout.count), f"detected: {layout.how}") if layout.count else ("", f"count by hand: {layout.how}")


def template(folder: Path, *, detect: bool = False, images: Path | None = None) -> str:
    """The CSV text: header item_id,sub_images,image,note and one row per image record; counts blank, or
    with ``detect`` the counts the layouts settle (``images``: the image folder, else the folder's own)."""
    records = json.loads((folder / IMAGE_FILE).read_text(encoding="utf-8"))
    if not isinstance(records, list):
        raise ValueError(f"{folder / IMAGE_FILE}: expected a JSON list of records")
    if detect and images is None:
        images = next((folder / d for d in IMAGE_DIRS if (folder / d).is_dir()), None)
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(["item_id", "sub_images", "image", "note"])
    for i, rec in enumerate(records):
        name = rec.get("input", "") if isinstance(rec, dict) else ""
        count, note = _proposal(images, name) if detect else ("", "")
        w.writerow([f"image-{i:04d}", count, name, note])
    return out.getvalue()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", type=Path, help=f"the PaSBench data folder (holding {IMAGE_FILE})")
    ap.add_argument("out", type=Path, help="the count file to write (pasbench.data.sub_images)")
    ap.add_argument("--force", action="store_true", help="overwrite an existing file")
    ap.add_argument("--detect", action="store_true", help="fill in the counts the composites' layouts settle")
    ap.add_argument("--images", type=Path, help="the image folder (default: <folder>/images or combine_images)")
    args = ap.parse_args(argv)
    if args.out.exists() and not args.force:
        print(f"error: {args.out} exists (its counts may be filled in already); --force overwrites it", file=sys.stderr)
        return 2
    try:
        text = template(args.folder, detect=args.detect, images=args.images)
    except (OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text, encoding="utf-8")
    rows = list(csv.reader(io.StringIO(text)))[1:]
    blank = sum(not r[1] for r in rows)
    print(f"{args.out}: {len(rows)} rows, {len(rows) - blank} counted from the layout, {blank} blank; check every "
          f"composite, fill in the blank sub_images (1-4), then set pasbench.data.sub_images to this file")
    return 0


if __name__ == "__main__":
    sys.exit(main())
