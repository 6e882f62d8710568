"""The human-label CSV the annotation app writes: exactly what `paths.human_labels` reads
(`aura.families.aura.stats.human_validation.read_human_labels`: columns model, item_id, axis, annotator, label; one row per
(model, item_id, axis, annotator), a duplicate is an error there; annotator `reference` = adjudicated label).

Every save holds an exclusive `fcntl.flock` on `<file>.lock` (a separate file, so the lock outlives a rename
of the data file), so two annotators' saves, in threads of one server or in two servers, never interleave:

- a new label is appended as one line in one `write` and fsync'ed (a crash leaves the file without that line
  or with it whole; a line cut short by an earlier crash is ended first);
- a changed label rewrites the file with the row replaced, through a temporary file renamed over it
  (`aura.io.atomic_write_text`), since the reader refuses a second row for the same unit and annotator;
- the same label again changes nothing.
"""
from __future__ import annotations

import csv
import fcntl
import io
import os
from contextlib import contextmanager
from pathlib import Path

from aura.config import UserError
from aura.io import atomic_write_text

from ..evaluate.schemas import LABELS
from ..stats.human_validation import COLUMNS, REFERENCE

KEY = ("model", "item_id", "axis", "annotator")


class LabelFileError(UserError):
    """The label file cannot be used (one line naming it)."""


class LabelStore:
    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self.lock_path = self.path.with_name(self.path.name + ".lock")
        with self._locked(fcntl.LOCK_SH):
            self._read()  # a file that is not a human-label CSV stops the app before it serves

    @contextmanager
    def _locked(self, mode: int = fcntl.LOCK_EX):
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.lock_path, "a") as fh:
            fcntl.flock(fh, mode)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    def _read(self) -> tuple[list[str], list[dict]]:
        if not self.path.exists() or self.path.stat().st_size == 0:
            return list(COLUMNS), []
        try:
            text = self.path.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            raise LabelFileError(f"{self.path}: not valid UTF-8 ({exc.reason})") from None
        reader = csv.DictReader(io.StringIO(text))
        header = list(reader.fieldnames or [])
        missing = [c for c in COLUMNS if c not in header]
        if missing:
            raise LabelFileError(f"{self.path}: missing column(s) {missing}; expected {list(COLUMNS)}")
        return header, [{k: v or "" for k, v in r.items() if k is not None} for r in reader]

    def rows(self) -> list[dict]:
        with self._locked(fcntl.LOCK_SH):
            return self._read()[1]

    def save(self, model: str, item_id: str, axis: str, annotator: str, label: str) -> str:
        """Record one label; returns 'appended', 'replaced' or 'unchanged'."""
        if axis not in LABELS or label not in LABELS[axis]:
            raise ValueError(f"label {label!r} is not a {axis} label")
        row = {"model": model, "item_id": item_id, "axis": axis, "annotator": annotator, "label": label}
        with self._locked():
            header, rows = self._read()
            same = [r for r in rows if all(r[k] == row[k] for k in KEY)]
            if same and same[-1]["label"] == label:
                return "unchanged"
            if same:
                for r in same:
                    r["label"] = label
                mode = self.path.stat().st_mode & 0o777
                atomic_write_text(self.path, _csv(header, rows, with_header=True))
                os.chmod(self.path, mode)  # the temporary file's 0600 would hide the labels from other readers
                return "replaced"
            new = not self.path.exists() or self.path.stat().st_size == 0
            lead = b""
            if not new:  # a line cut short by a crash is ended before the next one
                with open(self.path, "rb") as tail:
                    tail.seek(-1, os.SEEK_END)
                    lead = b"" if tail.read(1) == b"\n" else b"\n"
            with open(self.path, "ab") as fh:
                fh.write(lead + _csv(header, [row], with_header=new).encode("utf-8"))
                fh.flush()
                os.fsync(fh.fileno())
            if new:
                _fsync_dir(self.path.parent)
            return "appended"


def _csv(header: list[str], rows: list[dict], with_header: bool) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=header, lineterminator="\n", extrasaction="ignore", restval="")
    if with_header:
        w.writeheader()
    w.writerows(rows)
    return buf.getvalue()


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def valid_annotator(name: str) -> str | None:
    """Why a login name cannot be used, or None: non-empty, at most 40 printable characters, not `reference`."""
    if not name:
        return "enter your name"
    if len(name) > 40 or any(not c.isprintable() for c in name):
        return "a name is at most 40 printable characters"
    if name.casefold() == REFERENCE:
        return f"'{REFERENCE}' is the adjudicated label's row, not an annotator"
    return None
