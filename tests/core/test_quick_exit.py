"""aura.quick_exit: a process exits with its heap frozen, after the exit handlers registered after the call and
before those registered earlier, and what a process relies on at exit still happens."""
from __future__ import annotations

import subprocess
import sys

from conftest import REPO

PROGRAM = """
import atexit, gc, sys, tempfile
atexit.register(lambda: print("last handler, frozen:", gc.get_freeze_count() > 0))
from aura.quick_exit import skip_final_collections
skip_final_collections()
atexit.register(lambda: print("first handler, frozen:", gc.get_freeze_count() > 0))
kept = tempfile.TemporaryDirectory(dir=sys.argv[1])
print("folder:", kept.name)
out = open(sys.argv[2], "w")
out.write("written, never closed")
"""


def test_the_heap_is_frozen_at_exit_and_the_exit_handlers_still_run(tmp_path):
    proc = subprocess.run([sys.executable, "-c", PROGRAM, str(tmp_path), str(tmp_path / "out.txt")],
                          cwd=tmp_path, env={"PYTHONPATH": str(REPO / "src")}, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[1:] == ["first handler, frozen: False", "last handler, frozen: True"]
    folder = lines[0].removeprefix("folder: ")
    assert not (tmp_path / folder).exists()  # a temporary folder's finalizer ran
    assert (tmp_path / "out.txt").read_text() == "written, never closed"  # an open file was flushed
