"""Content-addressed response cache.

One file per entry, ``<root>/<k[:2]>/<k>.json``, written by temp file + link. Many Snakemake
jobs may read and write at once: the link is atomic and fails when the entry exists, so the
first answer of a key stays and a later writer gets it back (:meth:`Cache.put`); there is no
shared index to lock. Entries never expire. Only complete responses
are stored (the caller decides; errors and timeouts never reach the cache), each the moment it
arrives, so a job killed mid-stage has paid for nothing its rerun asks again. An entry that is
unreadable, cut short or not a whole response is a miss, said in one warning line and counted
(``cache_repaired`` in the job's summary), and is overwritten by the next answer. A full file
system is one line naming the folder (io.StorageFull).

Each Cache object lists the folder once, on first lookup, and answers hits from that listing: a
failed open per call cost the layer ~15% of its throughput (bench/llm_throughput.py). A miss is
not sent on the listing's word: the sender first claims the key (:meth:`Cache.claim`, a lock file
held with ``flock`` beside the entry, so jobs and runs that share the folder agree on who sends)
and reads the disk again under the claim; an answer another job stored after the listing is used
there, and a request is paid once across jobs and runs. The kernel drops a dead holder's lock, so
a killed job never leaves a key claimed.
"""
from __future__ import annotations

import asyncio
import contextlib
import errno
import fcntl
import itertools
import json
import os
import sys
from pathlib import Path
from typing import Any

from ..io import FULL, StorageFull, canonical_json, sha256_text
from ..redact import redact_bytes
from .images import redact_images


def cache_key(
    *,
    endpoint: str,
    model: str,
    messages: list[dict],
    params: dict[str, Any],
    response_format: dict | None,
    tools: list | None,
    sample_index: int,
) -> str:
    """sha256 over what determines an answer. Retries, timeouts and concurrency are not in it.

    An image part's data URL enters as ``sha256:<hex of its bytes>`` (images.redact_images): the key
    changes with the image bytes, not with the file name, and is not hashed over megabytes of base64.
    """
    payload = {
        "endpoint": endpoint,
        "model": model,
        "messages": redact_images(messages),
        "params": params,
        "response_format": response_format,
        "tools": tools,
        "sample_index": sample_index,
    }
    return sha256_text(canonical_json(payload))


def image_cache_key(*, endpoint: str, model: str, prompt: str, params: dict[str, Any], sample_index: int,
                    image_sha256: str | None = None) -> str:
    """sha256 over what determines a generated image (images endpoint); never equal to a chat key. An
    edit (`image_sha256`: sha256 of the uploaded image's bytes) is keyed as ``images.edit`` with that
    hash, so its key changes with the bytes; a generation's key is unchanged (no image field)."""
    payload = {"api": "images.generate", "endpoint": endpoint, "model": model, "prompt": prompt,
               "params": params, "sample_index": sample_index}
    if image_sha256 is not None:
        payload.update(api="images.edit", image_sha256=image_sha256)
    return sha256_text(canonical_json(payload))


def _complete_entry(entry: Any, key: str) -> bool:
    """An entry the client can answer from: its own key and a whole response."""
    if not isinstance(entry, dict) or entry.get("key") != key:
        return False
    resp = entry.get("response")
    return (isinstance(resp, dict) and "text" in resp and "finish_reason" in resp
            and isinstance(resp.get("usage"), dict)
            and {"prompt_tokens", "completion_tokens"} <= set(resp["usage"])
            and ("images" not in resp or (isinstance(resp["images"], list) and len(resp["images"]) > 0
                                          and all(isinstance(b, str) for b in resp["images"]))))


def _write_new(path: str, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        view = memoryview(data)
        while view:  # a short write (a file system filling up) goes on, and then fails with ENOSPC
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)


class Cache:
    def __init__(self, root: str | Path, enabled: bool = True):
        self.root = Path(root)
        self.enabled = enabled
        self._keys: set[str] | None = None
        self._dirs: set[str] = set()
        self._tmp_seq = itertools.count()
        self.repaired: list[str] = []  # entries found broken (and asked again); the client counts them

    def path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def _index(self) -> set[str]:
        if self._keys is None:
            keys: set[str] = set()
            if self.root.is_dir():
                for sub in os.scandir(self.root):
                    if sub.is_dir():
                        self._dirs.add(sub.name)
                        keys.update(e.name[:-5] for e in os.scandir(sub.path)
                                    if e.name.endswith(".json") and not e.name.startswith("."))
            self._keys = keys
        return self._keys

    def get(self, key: str) -> dict | None:
        if not self.enabled or key not in self._index():
            return None
        entry = self._read(key)
        if entry is None:  # removed by hand, or cut short, empty or not JSON: a miss, asked again
            self._index().discard(key)
            if self.path(key).exists():
                self.repaired.append(str(self.path(key)))
                print(f"warning: cache entry {self.path(key)} is not a whole answer (cut short, empty or not "
                      f"JSON): asked again, and the answer replaces it", file=sys.stderr, flush=True)
        return entry

    def contains(self, key: str) -> bool:
        return self.enabled and key in self._index()

    def put(self, key: str, entry: dict) -> dict:
        """Store ``entry`` unless a whole entry of ``key`` is there already; returns the entry stored.

        The first answer wins: when two jobs ask the same request at once, the second to finish
        finds the first's entry and gets it back, so both use one answer and the cache holds the
        answer both used (a rebuild from it reproduces them). Written as a temp file, then linked
        to its name (``os.link`` fails when the name exists: an atomic create-if-absent); an
        unreadable or partial entry there is replaced (rename). Readers only ever see whole
        entries. fsync is skipped on purpose: it cost ~3 ms per call (bench/llm_throughput.py),
        and the worst a power loss can leave is an empty or partial entry, which `get` treats as
        a miss.
        """
        if not self.enabled:
            return entry
        base = f"{self.root}/{self._subdir(key)}/"
        tmp, final = f"{base}.{key}.{os.getpid()}.{next(self._tmp_seq)}.tmp", f"{base}{key}.json"
        data = redact_bytes(json.dumps(entry, ensure_ascii=False).encode("utf-8"))
        stored = entry
        try:
            self._guard(lambda: _write_new(tmp, data))
            try:
                os.link(tmp, final)
            except FileExistsError:
                earlier = self._read(key)
                if earlier is None:
                    os.replace(tmp, final)  # a partial or foreign file: ours replaces it
                else:
                    stored = earlier
            except OSError:  # a file system without hard links: the last rename wins, as before
                os.replace(tmp, final)
        finally:
            try:
                os.unlink(tmp)
            except FileNotFoundError:
                pass
        self._index().add(key)
        return stored

    @contextlib.asynccontextmanager
    async def claim(self, key: str, poll_s: float = 0.02, max_poll_s: float = 0.5):
        """Hold ``key``'s send claim, shared by every process on this folder; yields the whole entry stored
        meanwhile (read from disk under the claim: another job's answer), else None and the caller sends.

        The claim is an exclusive ``flock`` on ``.<key>.lock`` beside the entry, polled (never blocking the event
        loop) with backoff from ``poll_s`` to ``max_poll_s``. The holder removes the file before it lets go; a
        waiter that locked a file already removed locks again (the inode check), so two never hold one key. A
        file system without flock (some network mounts) claims nothing: the entry is still read again.
        """
        if not self.enabled:
            yield None
            return
        self._subdir(key)
        lock, wait = f"{self.root}/{key[:2]}/.{key}.lock", poll_s
        fd = None
        while fd is None:
            fd = self._guard(lambda: os.open(lock, os.O_RDWR | os.O_CREAT, 0o644))
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                if os.fstat(fd).st_ino != os.stat(lock).st_ino:  # the holder before removed it: lock anew
                    raise BlockingIOError
            except (BlockingIOError, FileNotFoundError):
                os.close(fd)
                fd = None
                await asyncio.sleep(wait)
                wait = min(wait * 2, max_poll_s)
            except OSError as exc:
                if exc.errno not in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS):
                    os.close(fd)
                    raise
                break  # no flock here: unclaimed, as before claims existed
        try:
            entry = self._read(key)
            if entry is not None:
                self._index().add(key)
            yield entry
        finally:
            if fd is not None:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(lock)
                os.close(fd)

    def _subdir(self, key: str) -> str:
        sub = key[:2]
        if sub not in self._dirs:
            self._guard(lambda: (self.root / sub).mkdir(parents=True, exist_ok=True))
            self._dirs.add(sub)
        return sub

    def _guard(self, write):
        """``write()``, a full file system raised as StorageFull: one line naming the cache folder."""
        try:
            return write()
        except OSError as exc:
            if exc.errno not in FULL or isinstance(exc, StorageFull):
                raise
            raise StorageFull(exc.errno, f"the cache folder {self.root} cannot store answers: "
                                         f"{os.strerror(exc.errno)} (its file system is full); free space there "
                                         f"and rerun") from None

    def _read(self, key: str) -> dict | None:
        """The whole entry stored under ``key`` on disk, or None (absent, unreadable, partial)."""
        try:
            entry = json.loads(self.path(key).read_bytes().decode("utf-8"))
        except (FileNotFoundError, ValueError):  # ValueError: bad JSON or UTF-8 cut mid-character
            return None
        return entry if _complete_entry(entry, key) else None
