"""Fetch a family's data folder (seed trajectories, benchmark items, cases) from a pinned upstream archive,
with a recorded checksum.

The config names either a local folder or an upstream archive URL pinned to a commit (e.g.
``https://github.com/<owner>/<repo>/archive/<40-hex-commit>.tar.gz``). :func:`fetch_archive`
downloads the archive, computes its sha256 while streaming, and checks it against a small lock
file::

    {"url": "...", "sha256": "<64 hex>", "downloaded_at": "2024-01-01T00:00:00+00:00"}

The first download of a URL records its checksum (trust on first download); every later download
of that URL must match it, or :class:`ChecksumError` is raised and nothing is extracted. A lock
file that pins several URLs holds a JSON list of such objects.

Extraction is defensive: absolute member paths, ``..`` components, links that point outside the
archive, members written through a link, and device/FIFO members are refused with a
:class:`ValueError` naming the member. The result is moved into place with a rename, so ``dest``
is either the old folder or the complete new one, never a half-extracted mix. ``dest`` gets a
marker ``.fetched.json`` (url, sha256); when it matches the lock, later calls return at once
without touching the network. (The marker sits at the root of ``dest``: a loader reading
``<folder>/*.json`` below the root never sees it.)
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tarfile
import tempfile
import urllib.error
import urllib.request
import zipfile
from datetime import datetime, timezone
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any, Callable

from .io import atomic_write_text

__all__ = ["ChecksumError", "FetchError", "fetch_archive", "MARKER"]

#: Marker file written into ``dest`` after a successful fetch.
MARKER = ".fetched.json"

_CHUNK = 1 << 16
_USER_AGENT = "aura-eval-fetch/1"


class ChecksumError(ValueError):
    """A download's sha256 differs from the one recorded in the lock file."""

    def __init__(self, url: str, expected: str, got: str, lock_file: Path | None = None):
        self.url, self.expected, self.got, self.lock_file = url, expected, got, lock_file
        where = f" (recorded in {lock_file})" if lock_file is not None else ""
        super().__init__(
            f"checksum mismatch for {url}: expected sha256 {expected}{where}, got {got}; "
            "the upstream archive changed or the download was tampered with. Nothing was "
            "extracted. If the change is intended, delete the lock entry and fetch again."
        )


class FetchError(RuntimeError):
    """The archive could not be downloaded (HTTP error, network error, bad URL)."""


# ---------------------------------------------------------------------------------------------
# lock file


def _read_lock(lock_file: Path) -> list[dict[str, Any]]:
    """Entries of the lock file (``[]`` if it does not exist). A malformed lock is an error: a
    pin must never be silently dropped."""
    if not lock_file.exists():
        return []
    try:
        data = json.loads(lock_file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise ValueError(f"lock file {lock_file} is not readable JSON: {e}") from e
    entries = data if isinstance(data, list) else [data]
    for i, ent in enumerate(entries):
        if not (isinstance(ent, dict) and isinstance(ent.get("url"), str)
                and isinstance(ent.get("sha256"), str)):
            raise ValueError(
                f"lock file {lock_file}: entry {i} must be an object with string 'url' and "
                f"'sha256', got {ent!r}"
            )
    return entries


def _lock_sha(entries: list[dict[str, Any]], url: str) -> str | None:
    for ent in entries:
        if ent["url"] == url:
            return ent["sha256"].lower()
    return None


def _atomic_write_json(path: Path, data: Any) -> None:
    atomic_write_text(path, json.dumps(data, indent=2) + "\n")


def _record_lock(lock_file: Path, url: str, sha: str) -> None:
    entries = [e for e in _read_lock(lock_file) if e["url"] != url]
    entries.append({"url": url, "sha256": sha,
                    "downloaded_at": datetime.now(timezone.utc).isoformat(timespec="seconds")})
    _atomic_write_json(lock_file, entries[0] if len(entries) == 1 else entries)


def _read_marker(dest: Path) -> dict[str, Any] | None:
    try:
        data = json.loads((dest / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


# ---------------------------------------------------------------------------------------------
# download


def _download(url: str, into_dir: Path, timeout: float) -> tuple[Path, str]:
    """Stream ``url`` into a temp file in ``into_dir``; return (path, sha256 hex)."""
    req = urllib.request.Request(url, headers={"User-Agent": _USER_AGENT})
    fd, tmp = tempfile.mkstemp(dir=into_dir, prefix=".download-", suffix=".part")
    path = Path(tmp)
    h = hashlib.sha256()
    try:
        with os.fdopen(fd, "wb") as out:
            try:
                with urllib.request.urlopen(req, timeout=timeout) as resp:
                    status = getattr(resp, "status", None)
                    if status is not None and not 200 <= status < 300:
                        raise FetchError(f"HTTP {status} while downloading {url}")
                    while chunk := resp.read(_CHUNK):
                        h.update(chunk)
                        out.write(chunk)
            except urllib.error.HTTPError as e:
                raise FetchError(f"HTTP {e.code} {e.reason} while downloading {url}") from e
            except urllib.error.URLError as e:
                raise FetchError(f"could not download {url}: {e.reason}") from e
            except (OSError, ValueError) as e:  # timeouts, resets, unknown URL type
                raise FetchError(f"could not download {url}: {e}") from e
    except BaseException:
        path.unlink(missing_ok=True)
        raise
    return path, h.hexdigest()


# ---------------------------------------------------------------------------------------------
# safe extraction


def _check_name(name: str, kind: str = "member") -> PurePosixPath:
    """Normalise an archive path; refuse absolute paths and ``..`` components."""
    if not name or "\x00" in name:
        raise ValueError(f"unsafe archive {kind} {name!r}: empty name or NUL byte")
    if name.startswith(("/", "\\")) or PureWindowsPath(name).drive:
        raise ValueError(f"unsafe archive {kind} {name!r}: absolute path")
    parts = [p for p in name.replace("\\", "/").split("/") if p not in ("", ".")]
    if ".." in parts:
        raise ValueError(f"unsafe archive {kind} {name!r}: '..' path component")
    return PurePosixPath(*parts) if parts else PurePosixPath(".")


def _inside(rel: str) -> bool:
    """Whether a root-relative POSIX path (already joined) stays inside the root."""
    norm = os.path.normpath(rel)
    return not (os.path.isabs(norm) or norm == ".." or norm.startswith("../"))


def _extract_tar(archive: Path, root: Path) -> None:
    with tarfile.open(archive, "r:*") as tf:
        members = tf.getmembers()
        links = set()
        for m in members:
            p = _check_name(m.name)
            if m.issym():
                if m.linkname.startswith(("/", "\\")) or PureWindowsPath(m.linkname).drive:
                    raise ValueError(f"unsafe archive member {m.name!r}: absolute link target "
                                     f"{m.linkname!r}")
                if not _inside(str(p.parent / m.linkname)):
                    raise ValueError(f"unsafe archive member {m.name!r}: link target "
                                     f"{m.linkname!r} points outside the archive")
                links.add(p)
            elif m.islnk():
                try:
                    _check_name(m.linkname)
                except ValueError as e:
                    raise ValueError(f"unsafe archive member {m.name!r}: hard link target "
                                     f"{m.linkname!r} points outside the archive") from e
                links.add(p)
            elif not (m.isfile() or m.isdir()):
                raise ValueError(f"unsafe archive member {m.name!r}: special file "
                                 "(device, FIFO or unknown type)")
        for m in members:  # no member may be written through a link
            p = _check_name(m.name)
            for anc in p.parents:
                if anc in links:
                    raise ValueError(f"unsafe archive member {m.name!r}: path goes through "
                                     f"link {str(anc)!r}")
        kwargs: dict[str, Any] = {}
        if hasattr(tarfile, "data_filter"):  # Python >= 3.11.4: the stdlib's own checks too
            kwargs["filter"] = "data"
        try:
            tf.extractall(root, members=members, **kwargs)
        except tarfile.FilterError as e:  # type: ignore[attr-defined]
            name = getattr(getattr(e, "tarinfo", None), "name", "?")
            raise ValueError(f"unsafe archive member {name!r}: {e}") from e


def _extract_zip(archive: Path, root: Path) -> None:
    with zipfile.ZipFile(archive) as zf:
        for info in zf.infolist():
            _check_name(info.filename)
        # zipfile writes symlink entries as plain files, so no link can escape.
        zf.extractall(root)


def _extract(archive: Path, root: Path, url: str) -> None:
    with open(archive, "rb") as fh:
        head = fh.read(4)
    if head.startswith(b"PK\x03\x04") or head.startswith(b"PK\x05\x06"):
        _extract_zip(archive, root)
    elif head.startswith(b"\x1f\x8b") or tarfile.is_tarfile(archive):
        _extract_tar(archive, root)
    elif zipfile.is_zipfile(archive):
        _extract_zip(archive, root)
    else:
        raise ValueError(f"{url} is neither a tar(.gz) nor a zip archive")
    _check_links(root, "archive")  # belt and braces


def _check_links(tree: Path, what: str) -> None:
    """No symlink under ``tree`` may resolve outside it."""
    real_root = os.path.realpath(tree)
    for dirpath, dirnames, filenames in os.walk(tree):
        for n in dirnames + filenames:
            p = os.path.join(dirpath, n)
            if os.path.islink(p):
                target = os.path.realpath(p)
                if os.path.commonpath([real_root, target]) != real_root:
                    raise ValueError(f"unsafe archive member {os.path.relpath(p, tree)!r}: "
                                     f"link resolves outside the {what}")


def _select(root: Path, subdir: str | None, url: str) -> Path:
    """The folder to install: ``<single top folder>/<subdir>``, else ``<subdir>``; without
    ``subdir`` the single top folder (GitHub archives) or the whole extraction."""
    entries = list(root.iterdir())
    top = entries[0] if len(entries) == 1 and entries[0].is_dir() \
        and not entries[0].is_symlink() else None
    if subdir is None:
        return top if top is not None else root
    sub = _check_name(subdir, kind="subdir")
    candidates = ([top / sub] if top is not None else []) + [root / sub]
    for c in candidates:
        if c.is_dir() and not c.is_symlink():
            return c
    listing = sorted(str(e.relative_to(root)) for e in (top or root).iterdir())
    raise ValueError(f"subdir {subdir!r} not found in archive {url}; "
                     f"{'top folder ' + top.name if top else 'root'} contains {listing}")


def _install(src: Path, dest: Path) -> None:
    """Move ``src`` to ``dest`` by rename; an existing ``dest`` is replaced only once the new
    folder is in place (and restored if that fails)."""
    if not dest.exists() and not dest.is_symlink():
        os.rename(src, dest)
        return
    backup = Path(tempfile.mkdtemp(dir=dest.parent, prefix=f".{dest.name}.old-"))
    backup.rmdir()
    os.rename(dest, backup)
    try:
        os.rename(src, dest)
    except BaseException:
        os.rename(backup, dest)
        raise
    if backup.is_dir() and not backup.is_symlink():
        shutil.rmtree(backup, ignore_errors=True)
    else:
        backup.unlink(missing_ok=True)


# ---------------------------------------------------------------------------------------------
# public API


def fetch_archive(url: str, dest: Path, lock_file: Path, subdir: str | None = None,
                  timeout: float = 60, check: Callable[[Path], None] | None = None) -> Path:
    """Download ``url`` (tar.gz/tgz or zip), verify or record its sha256 in ``lock_file``,
    extract it safely and install ``[<top folder>/]<subdir>`` (or the top folder) as ``dest``.

    Returns ``dest`` at once, without a download, when ``dest`` holds a :data:`MARKER` whose url
    and sha256 match the lock's entry for ``url``.

    ``check`` (e.g. a family's expected record counts) is called on the
    extracted folder before it is installed; when it raises, nothing is installed and no checksum
    is recorded.

    Raises :class:`ChecksumError` when the download differs from the locked checksum (nothing is
    extracted, ``dest`` is untouched), :class:`FetchError` for HTTP and network errors (the
    message names the status and URL), and :class:`ValueError` for unsafe or unknown archives,
    a missing ``subdir``, a malformed lock file or a failed ``check``.
    """
    dest, lock_file = Path(dest), Path(lock_file)
    entries = _read_lock(lock_file)
    expected = _lock_sha(entries, url)
    if expected is not None and dest.is_dir():
        marker = _read_marker(dest)
        if marker and marker.get("url") == url and str(marker.get("sha256", "")).lower() == expected:
            return dest

    dest.parent.mkdir(parents=True, exist_ok=True)
    archive, got = _download(url, dest.parent, timeout)
    tmp_root: Path | None = None
    try:
        if expected is not None and got != expected:
            raise ChecksumError(url, expected, got, lock_file)
        tmp_root = Path(tempfile.mkdtemp(dir=dest.parent, prefix=f".{dest.name}.extract-"))
        _extract(archive, tmp_root, url)
        chosen = _select(tmp_root, subdir, url)
        _check_links(chosen, "installed folder")
        if check is not None:
            check(chosen)
        _atomic_write_json(chosen / MARKER, {"url": url, "sha256": got})
        if chosen == tmp_root:
            _install(tmp_root, dest)
            tmp_root = None
        else:
            _install(chosen, dest)
        if expected is None:  # trust on first download, recorded only once installed
            _record_lock(lock_file, url, got)
    finally:
        archive.unlink(missing_ok=True)
        if tmp_root is not None:
            shutil.rmtree(tmp_root, ignore_errors=True)
    return dest
