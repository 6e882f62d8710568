"""The image files the PaSBench Inspect task writes from an export's embedded images live as long as the process
that reads them (the solver opens them in every epoch) and are deleted when it exits. A real subprocess reads a
Parquet split with two image items; the folder it wrote is checked during and after its life."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")
pytest.importorskip("inspect_ai")

PNG = b"\x89PNG\r\n\x1a\n" + b"\0" * 16  # the bytes are written as they are: no image library reads them here

READ = """
import sys
from pathlib import Path
from aura.families.pasbench.inspect_task import read_items

items = read_items(sys.argv[1])
paths = [Path(p) for it in items for p in it["images"]]
assert all(p.read_bytes().startswith(b"\\x89PNG") for p in paths)  # there while the process runs
print(paths[0].parents[1])
"""


def test_the_image_files_of_an_export_are_deleted_when_the_reading_process_ends(tmp_path):
    split = tmp_path / "pasbench_image" / "test.parquet"
    split.parent.mkdir()
    rows = [{"item_id": f"i{n}", "images": [{"bytes": PNG, "path": f"photo{n}.png"}], "risk_reason": "r",
             "trigger": "t"} for n in range(2)]
    pq.write_table(pa.Table.from_pylist(rows), split)
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "TMPDIR": str(tmp_path / "tmp")}
    (tmp_path / "tmp").mkdir()
    out = subprocess.run([sys.executable, "-c", READ, str(split)], capture_output=True, text=True, timeout=120,
                         env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    folder = Path(out.stdout.strip().splitlines()[-1])
    assert folder.name.startswith("aura-pasbench-images-") and folder.parent == tmp_path / "tmp"
    assert not folder.exists() and list((tmp_path / "tmp").iterdir()) == []
