"""Write the template of PaSBench's sub-image count file (``pasbench.data.sub_images``).

Upstream ships each image item as ONE composite image of 1-4 sub-images (``combine_images.zip``); how many is
not in the file, and the loader does not guess it from the pixels. This writes one row per image record of
``<folder>/multi_modal_eval_hugging.json``::

    item_id,sub_images,image
    image-0000,,115.png
    image-0001,,154.png
    ...

``item_id`` is the item the loader makes of record i (``image-<i:04d>``), ``image`` the record's file name (the
loader checks it), and ``sub_images`` is left blank: open each composite and write its number of panels (1-4).
The loader refuses the file while a cell is blank, naming the file and the row.

    python scripts/pasbench_sub_images.py data/interim/pasbench config/pasbench_sub_images.csv [--force]
"""
from __future__ import annotations

import argparse
import csv
import io
import json
import sys
from pathlib import Path

IMAGE_FILE = "multi_modal_eval_hugging.json"


def template(folder: Path) -> str:
    """The CSV text: header item_id,sub_images,image and one row per image record, counts blank."""
    records = json.loads((folder / IMAGE_FILE).read_text(encoding="utf-8"))
    if not isinstance(records, list):
        raise ValueError(f"{folder / IMAGE_FILE}: expected a JSON list of records")
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(["item_id", "sub_images", "image"])
    for i, rec in enumerate(records):
        name = rec.get("input", "") if isinstance(rec, dict) else ""
        w.writerow([f"image-{i:04d}", "", name])
    return out.getvalue()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", type=Path, help=f"the PaSBench data folder (holding {IMAGE_FILE})")
    ap.add_argument("out", type=Path, help="the count file to write (pasbench.data.sub_images)")
    ap.add_argument("--force", action="store_true", help="overwrite an existing file")
    args = ap.parse_args(argv)
    if args.out.exists() and not args.force:
        print(f"error: {args.out} exists (its counts may be filled in already); --force overwrites it", file=sys.stderr)
        return 2
    try:
        text = template(args.folder)
    except (OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text, encoding="utf-8")
    rows = text.count("\n") - 1
    print(f"{args.out}: {rows} rows; fill in each composite's sub_images (1-4), then set pasbench.data.sub_images "
          f"to this file")
    return 0


if __name__ == "__main__":
    sys.exit(main())
