"""Exit without the interpreter's last walks of the whole heap.

At exit CPython runs the exit handlers, then collects garbage over every object the process made and tears its
modules down, collecting again: 0.35-0.5 s of CPU for a process that imported pandas, SQLAlchemy and the like (a
Snakemake run or dry run, a stage, an LPS-Bench tool server), none of it for anything the process writes.
`skip_final_collections()` registers `gc.freeze()` as an exit handler: the heap moves out of the collector's
reach just before the interpreter finalises. What a process relies on at exit still happens: every exit handler
runs (logging's flush, weakref finalizers such as a temporary folder's removal), and an object freed by its
reference count (a closed file, a module's globals) is freed as before. Only garbage in reference cycles is left
for the operating system to reclaim with the rest of the process.

Standard library only: `python -m aura` calls it before any import of the package's own.
"""
from __future__ import annotations

import atexit
import gc


def skip_final_collections() -> None:
    """Freeze the heap as the process exits (after the exit handlers registered from now on)."""
    atexit.register(gc.freeze)
