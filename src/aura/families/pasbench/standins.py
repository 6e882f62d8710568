"""Stand-in images for a PaSBench rehearsal (``aura rehearse``) on a copy of the upstream files without images.

Upstream's 128 composites (``combine_images.zip``) are not in the JSON files; a rehearsal still needs one image
file per image record, under the name the record gives, and the sub-image count file. ``write`` makes both:
plain PNGs (one grey per record, ``SIZE`` pixels: the composites' own sizes are not known without them) that
say they are stand-ins, and a count file whose counts (1-4, mean 2.2 as the paper's Table 1) are drawn from the
record index, its ``note`` column saying "stand-in". A run on them measures the pipeline, never the models'
vision: the simulated models do not look at pixels.
"""
from __future__ import annotations

import csv
import io
import json
import zlib
from pathlib import Path

from .data import IMAGE_FILE

SIZE = (1024, 512)
COUNTS = (1, 2, 2, 2, 3, 3, 2, 1, 4, 2)  # a cycle with Table 1's mean of 2.2 sub-images


def png(width: int, height: int, grey: int) -> bytes:
    """A valid one-colour greyscale PNG."""
    def chunk(tag: bytes, data: bytes) -> bytes:
        return len(data).to_bytes(4, "big") + tag + data + zlib.crc32(tag + data).to_bytes(4, "big")

    raw = b"".join(b"\x00" + bytes([grey]) * width for _ in range(height))
    header = width.to_bytes(4, "big") + height.to_bytes(4, "big") + bytes([8, 0, 0, 0, 0])
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"tEXt", b"Comment\x00aura rehearsal stand-in")
            + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))


def write(upstream: Path, dest: Path) -> tuple[Path, Path]:
    """Stand-in images for every image record of ``upstream``'s image file, and their count file, under
    ``dest``; returns (images folder, count file). Existing files are kept."""
    records = json.loads((Path(upstream) / IMAGE_FILE).read_text(encoding="utf-8"))
    images = Path(dest) / "images"
    images.mkdir(parents=True, exist_ok=True)
    out = io.StringIO()
    rows = csv.writer(out, lineterminator="\n")
    rows.writerow(["item_id", "sub_images", "image", "note"])
    for i, rec in enumerate(records):
        name = rec["input"]
        path = images / name
        if not path.exists():
            path.write_bytes(png(*SIZE, 64 + (i * 37) % 160))
        rows.writerow([f"image-{i:04d}", COUNTS[i % len(COUNTS)], name, "stand-in"])
    counts = Path(dest) / "sub_images.csv"
    counts.write_text(out.getvalue(), encoding="utf-8")
    return images, counts
