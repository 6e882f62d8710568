"""Small I/O helpers: canonical JSON, hashing, atomic writes, JSONL."""
from __future__ import annotations

import errno
import hashlib
import json
import os
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any, Iterable, Iterator

from .redact import redact

FULL = (errno.ENOSPC, errno.EDQUOT)  # the file system (or the user's quota) has no room left


class StorageFull(OSError):
    """A write found its file system full; the message is one line naming the path (the CLI prints it)."""


def storage_full(path: str | os.PathLike, exc: OSError) -> StorageFull:
    return StorageFull(exc.errno, f"cannot write {path}: {os.strerror(exc.errno)} (its file system is full); "
                                  f"free space there and rerun")


def canonical_json(obj: Any) -> str:
    """Deterministic JSON text: sorted keys, no whitespace, UTF-8 kept as is."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def sha256_file(path: str | os.PathLike) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def read_utf8(path: str | os.PathLike, error: type[Exception], what: str = "") -> str:
    """A file's text, or `error` with one line naming the file: unreadable, or not valid UTF-8 (with the
    offending byte and its offset). `what` names the content, e.g. "human labels"."""
    lead = f"{path}: cannot read {what or 'the file'}"
    try:
        data = Path(path).read_bytes()
    except OSError as e:
        raise error(f"{lead}: {e.strerror or e}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise error(f"{lead}: not valid UTF-8: byte {data[e.start]:#04x} at offset {e.start} ({e.reason})") from None


@contextmanager
def atomic_file(path: str | os.PathLike, mode: str = "w", perms: int | None = None) -> Iterator[IO]:
    """Open a temp file beside `path` (mode "w" text or "wb" bytes); on a clean exit fsync it and rename
    it over `path`, on any exception remove it. A crash leaves the old file or the new one, never half; a full
    file system is `StorageFull`, one line naming `path`.
    """
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as exc:
        raise (storage_full(path, exc) if exc.errno in FULL else exc) from None
    try:
        with os.fdopen(fd, mode, **({} if "b" in mode else {"encoding": "utf-8"})) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        if perms is not None:
            os.chmod(tmp, perms)
        os.replace(tmp, path)
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        if isinstance(exc, OSError) and not isinstance(exc, StorageFull) and exc.errno in FULL:
            raise storage_full(path, exc) from None
        raise


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    """Write `text` to `path` atomically (see `atomic_file`), any registered API key replaced (aura.redact)."""
    with atomic_file(path) as fh:
        fh.write(redact(text))


def atomic_write_json(path: str | os.PathLike, obj: Any) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, ensure_ascii=False, sort_keys=True) + "\n")


def write_jsonl(path: str | os.PathLike, rows: Iterable[dict]) -> int:
    lines = [json.dumps(r, ensure_ascii=False, sort_keys=True) for r in rows]
    atomic_write_text(path, "".join(line + "\n" for line in lines))
    return len(lines)


def read_jsonl(path: str | os.PathLike) -> Iterator[dict]:
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                yield json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}:{lineno}: invalid JSON line: {exc}") from exc


def read_person_table(path: str | os.PathLike, columns: list[str], what: str,
                      error: type[Exception]) -> list[tuple[str, dict]]:
    """(where, row) for every row of a CSV or JSONL file a person writes (review verdicts, overrides,
    feedback); `where` names the file and row. Every problem raises `error` with one line naming both."""
    import pandas as pd  # only the stages that read such files pay for pandas

    path = Path(path)
    if not path.is_file():
        raise error(f"{path}: {what} file not found")
    if path.suffix == ".jsonl":
        rows = []
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise error(f"{path}: line {n}: not valid JSON ({exc.msg})") from None
            if not isinstance(obj, dict):
                raise error(f"{path}: line {n}: expected an object with {', '.join(columns)}")
            rows.append((f"{path}: line {n}", obj))
        return rows
    if path.suffix == ".csv":
        try:
            df = pd.read_csv(path, dtype=str, keep_default_na=False)
        except (pd.errors.EmptyDataError, pd.errors.ParserError, UnicodeDecodeError) as exc:
            raise error(f"{path}: cannot read the {what} CSV: {' '.join(str(exc).split())}") from None
        missing = [c for c in columns if c not in df.columns]
        if missing:
            raise error(f"{path}: missing column(s) {missing}; expected {', '.join(columns)}")
        return [(f"{path}: row {i + 2}", r.to_dict()) for i, r in df.iterrows()]
    raise error(f"{path}: {what} file must be .csv or .jsonl")


def person_verdicts(path: str | os.PathLike, key: str, known, known_as: str, columns: list[str], what: str,
                    error: type[Exception]) -> list[tuple[str, str, str, dict]]:
    """(where, id, verdict, row) for every row of a person's review file (read_person_table, with `key`, verdict
    and `columns`): its `key` names one of `known` (`known_as` says what they are) and no earlier row's, its
    verdict is accept or reject (any case). Every problem raises `error` with one line naming the file and row."""
    seen: dict[str, str] = {}
    out = []
    for where, row in read_person_table(path, [key, "verdict", *columns], what, error):
        rid = row[key].strip() if isinstance(row.get(key), str) else ""
        verdict = row["verdict"].strip().lower() if isinstance(row.get("verdict"), str) else ""
        if not rid:
            raise error(f"{where}: {key} is missing or empty")
        if verdict not in ("accept", "reject"):
            raise error(f"{where}: verdict {row.get('verdict')!r} is not accept or reject")
        if rid not in known:
            raise error(f"{where}: {key} {rid!r} is not {known_as} ({', '.join(sorted(known))})")
        if rid in seen:
            raise error(f"{where}: {key} {rid!r} is already listed at {seen[rid]}")
        seen[rid] = where
        out.append((where, rid, verdict, row))
    return out
