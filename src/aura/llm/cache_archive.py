"""`python -m aura cache export|import`: the response cache a run used, as one archive others can rebuild from.

export: every call log the run's jobs wrote (`<paths.logs>/**/*.calls.jsonl`, every rule of every family) names
the cache key of each answered call (a live answer or a cache hit). Those entries, and only those, go into one
tar.gz: ``MANIFEST.json`` first (format, and per entry its key, member name, size and sha256; the number of keys
per rule), then ``cache/<k[:2]>/<k>.json`` in key order, each entry's bytes exactly as the cache holds them. Member
order, mtimes (0), owners and the gzip header are fixed, so exporting the same entries twice gives the same bytes.
A key a log names that the cache does not hold whole stops the export with one line (nothing written).

import: the archive is read twice. The first pass checks everything and writes nothing: the manifest comes first,
every member is a listed cache entry with the listed sha256 and is a whole entry for its key, no member is
missing or extra, and no entry of the configured cache holds a different answer for a key (unless --replace).
The second pass writes the entries into `paths.cache` (temp file + rename, as the cache itself does). A bad
archive stops with one line naming the member, and nothing is unpacked.

The cache key and entry format are the cache's own (aura.llm.cache); this module only copies entries.
"""
from __future__ import annotations

import gzip
import hashlib
import io
import json
import re
import sys
import tarfile
import zlib
from collections import Counter
from pathlib import Path

from ..config import ConfigError, UserError, load_config
from ..io import atomic_file
from .cache import Cache, _complete_entry

FORMAT = "aura-cache-archive/1"
MANIFEST = "MANIFEST.json"
MEMBER = re.compile(r"cache/([0-9a-f]{2})/([0-9a-f]{64})\.json")
KEY = re.compile(r"[0-9a-f]{64}")
MAX_MANIFEST_BYTES = 1 << 30


class ArchiveError(UserError):
    """A problem with the archive, the call logs or the cache: one line, nothing written."""


def member_name(key: str) -> str:
    return f"cache/{key[:2]}/{key}.json"


# ---- export --------------------------------------------------------------------------------------------------

def used_keys(logs_dir: str | Path) -> tuple[dict[str, str], Counter, int]:
    """(key -> the first call log naming it, distinct keys per rule, call logs read) over every call log.

    A record counts when its call was answered (`status` ok: a live answer, which the client caches the moment it
    arrives, or a cache hit); failed calls were never cached."""
    logs = Path(logs_dir)
    found: dict[str, str] = {}
    per_rule: dict[str, set[str]] = {}
    files = sorted(logs.rglob("*.calls.jsonl")) if logs.is_dir() else []
    for path in files:
        rule = path.relative_to(logs).parts[0] if len(path.relative_to(logs).parts) > 1 else path.stem
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ArchiveError(f"{path}: cannot read the call log: {exc}") from None
        for lineno, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except ValueError:
                raise ArchiveError(f"{path}:{lineno}: not a JSON call record") from None
            if not isinstance(rec, dict) or rec.get("status") != "ok":
                continue
            key = rec.get("key")
            if not isinstance(key, str) or not KEY.fullmatch(key):
                raise ArchiveError(f"{path}:{lineno}: call record without a cache key (key={key!r})")
            found.setdefault(key, f"{path}:{lineno}")
            per_rule.setdefault(rule, set()).add(key)
    return found, Counter({rule: len(keys) for rule, keys in per_rule.items()}), len(files)


def _entry_bytes(cache: Cache, key: str, where: str) -> bytes:
    path = cache.path(key)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise ArchiveError(f"{where}: key {key} is not in the cache {cache.root} (entry removed since the job ran?)"
                           ) from None
    try:
        entry = json.loads(data.decode("utf-8"))
    except ValueError:
        entry = None
    if not _complete_entry(entry, key):
        raise ArchiveError(f"{path}: not a whole cache entry for key {key} (named by {where})")
    return data


def _tarinfo(name: str, size: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode = size, 0, 0o644
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info


def export(config, out: str | Path) -> dict:
    """Write the archive of every entry the run's call logs name; return its manifest."""
    cache = Cache(config.paths["cache"])
    keys, per_rule, n_logs = used_keys(config.paths["logs"])
    if not keys:
        raise ArchiveError(f"no answered call in the call logs under {config.paths['logs']} ({n_logs} logs): "
                           f"run the workflow first")
    entries = []
    for key in sorted(keys):
        data = _entry_bytes(cache, key, keys[key])
        entries.append({"key": key, "member": member_name(key), "bytes": len(data),
                        "sha256": hashlib.sha256(data).hexdigest()})
    manifest = {"format": FORMAT, "count": len(entries), "call_logs": n_logs,
                "keys_per_rule": dict(sorted(per_rule.items())), "entries": entries}
    manifest_bytes = (json.dumps(manifest, indent=1, sort_keys=True) + "\n").encode("utf-8")
    with atomic_file(out, "wb") as raw:
        with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=6) as gz, \
                tarfile.open(fileobj=gz, mode="w", format=tarfile.USTAR_FORMAT) as tar:
            tar.addfile(_tarinfo(MANIFEST, len(manifest_bytes)), io.BytesIO(manifest_bytes))
            for e in entries:  # read again: the bytes written are the bytes the manifest names
                data = _entry_bytes(cache, e["key"], keys[e["key"]])
                if hashlib.sha256(data).hexdigest() != e["sha256"]:
                    raise ArchiveError(f"{cache.path(e['key'])}: changed while being exported; export again")
                tar.addfile(_tarinfo(e["member"], len(data)), io.BytesIO(data))
    return manifest


# ---- import --------------------------------------------------------------------------------------------------

def _members(archive: Path):
    """(manifest, iterator of (member name, bytes)) of the archive, read as a stream; the manifest is checked."""
    try:
        tar = tarfile.open(archive, mode="r:gz")
    except FileNotFoundError:
        raise ArchiveError(f"{archive}: no such archive") from None
    except (tarfile.TarError, OSError, EOFError, zlib.error) as exc:
        raise ArchiveError(f"{archive}: not a readable tar.gz archive ({exc})") from None
    try:
        first = tar.next()
        if first is None or first.name != MANIFEST or not first.isfile() or first.size > MAX_MANIFEST_BYTES:
            raise ArchiveError(f"{archive}: member {first.name if first else '(none)'}: the first member must be "
                               f"{MANIFEST}")
        try:
            manifest = json.loads(tar.extractfile(first).read().decode("utf-8"))
        except ValueError:
            raise ArchiveError(f"{archive}: member {MANIFEST}: not valid JSON") from None
    except (tarfile.TarError, OSError, EOFError, zlib.error) as exc:
        tar.close()
        raise ArchiveError(f"{archive}: archive damaged ({exc})") from None
    except BaseException:
        tar.close()
        raise
    _check_manifest(archive, manifest)

    def stream():
        try:
            while True:
                try:
                    info = tar.next()
                    if info is None:
                        return
                    if not info.isfile():
                        raise ArchiveError(f"{archive}: member {info.name}: not a regular file")
                    data = tar.extractfile(info).read()
                except (tarfile.TarError, OSError, EOFError, zlib.error) as exc:
                    raise ArchiveError(f"{archive}: archive damaged after {len(seen)} entries ({exc})") from None
                seen.append(info.name)
                yield info.name, data
        finally:
            tar.close()

    seen: list[str] = []
    return manifest, stream()


def _check_manifest(archive: Path, manifest) -> None:
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        fmt = manifest.get("format") if isinstance(manifest, dict) else None
        raise ArchiveError(f"{archive}: member {MANIFEST}: format {fmt!r}, expected {FORMAT!r}")
    entries = manifest.get("entries")
    if not isinstance(entries, list) or manifest.get("count") != len(entries):
        raise ArchiveError(f"{archive}: member {MANIFEST}: entries missing or not as many as its count")
    for i, e in enumerate(entries):
        ok = (isinstance(e, dict) and isinstance(e.get("key"), str) and KEY.fullmatch(e["key"])
              and e.get("member") == member_name(e["key"]) and isinstance(e.get("sha256"), str)
              and re.fullmatch(r"[0-9a-f]{64}", e["sha256"]))
        if not ok:
            raise ArchiveError(f"{archive}: member {MANIFEST}: entry {i} is not a key, member and sha256")
    if len({e["key"] for e in entries}) != len(entries):
        raise ArchiveError(f"{archive}: member {MANIFEST}: a key is listed twice")


def _check_member(archive: Path, listed: dict[str, dict], done: set[str], name: str, data: bytes) -> str:
    """The member's key, after every check; ArchiveError naming the member otherwise."""
    m = MEMBER.fullmatch(name)
    if m is None or name not in listed:
        raise ArchiveError(f"{archive}: member {name}: not a cache entry listed in {MANIFEST}")
    if name in done:
        raise ArchiveError(f"{archive}: member {name}: appears twice")
    key = listed[name]["key"]
    if hashlib.sha256(data).hexdigest() != listed[name]["sha256"]:
        raise ArchiveError(f"{archive}: member {name}: sha256 differs from {MANIFEST} (damaged or edited)")
    try:
        entry = json.loads(data.decode("utf-8"))
    except ValueError:
        entry = None
    if not _complete_entry(entry, key):
        raise ArchiveError(f"{archive}: member {name}: not a whole cache entry for key {key}")
    return key


def _existing(cache: Cache, key: str) -> bytes | None:
    """The bytes of a whole entry the cache holds for `key` (a partial or unreadable one counts as none)."""
    try:
        data = cache.path(key).read_bytes()
        entry = json.loads(data.decode("utf-8"))
    except (FileNotFoundError, ValueError):
        return None
    return data if _complete_entry(entry, key) else None


def _write(cache: Cache, key: str, data: bytes) -> None:
    with atomic_file(cache.path(key), "wb", perms=0o644) as fh:
        fh.write(data)


def verify(archive: str | Path, cache: Cache | None = None, replace: bool = False) -> dict:
    """Check the whole archive (and, given a cache, that no entry there differs); write nothing. The manifest."""
    archive = Path(archive)
    manifest, members = _members(archive)
    listed = {e["member"]: e for e in manifest["entries"]}
    done: set[str] = set()
    conflicts: list[str] = []
    for name, data in members:
        key = _check_member(archive, listed, done, name, data)
        done.add(name)
        if cache is not None and not replace:
            have = _existing(cache, key)
            if have is not None and have != data:
                conflicts.append(key)
    missing = sorted(set(listed) - done)
    if missing:
        raise ArchiveError(f"{archive}: member {missing[0]}: listed in {MANIFEST} but not in the archive "
                           f"({len(missing)} missing)")
    if conflicts:
        raise ArchiveError(f"{archive}: {len(conflicts)} entries hold a different answer than the cache "
                           f"{cache.root} (first: {member_name(conflicts[0])}); nothing unpacked; --replace takes "
                           f"the archive's")
    return manifest


def import_archive(config, archive: str | Path, replace: bool = False) -> dict:
    """Verify, then unpack into the configured cache. Counts: entries, written, present (already identical)."""
    cache = Cache(config.paths["cache"])
    archive = Path(archive)
    manifest = verify(archive, cache, replace)
    listed = {e["member"]: e for e in manifest["entries"]}
    written = present = 0
    done: set[str] = set()
    _, members = _members(archive)
    for name, data in members:  # checked again: the file could have changed since the first pass
        key = _check_member(archive, listed, done, name, data)
        done.add(name)
        if _existing(cache, key) == data:
            present += 1
            continue
        _write(cache, key, data)
        written += 1
    return {"entries": manifest["count"], "written": written, "present": present}


# ---- command -------------------------------------------------------------------------------------------------

def add_arguments(parser) -> None:
    sub = parser.add_subparsers(dest="cache_command", required=True)
    ex = sub.add_parser("export", help="the cache entries a run used (from its call logs) into one tar.gz with a "
                                       "manifest of keys and sha256 checksums")
    ex.add_argument("--configfile", required=True)
    ex.add_argument("--out", required=True, metavar="ARCHIVE", help="the archive to write (.tar.gz)")
    im = sub.add_parser("import", help="verify every checksum of an exported archive, then unpack it into the "
                                       "configured cache (paths.cache)")
    im.add_argument("archive", metavar="ARCHIVE")
    im.add_argument("--configfile", required=True)
    im.add_argument("--replace", action="store_true",
                    help="take the archive's entry where the cache holds a different answer for a key")


def run(args) -> int:
    try:
        config = load_config(args.configfile)
        if args.cache_command == "export":
            manifest = export(config, args.out)
            rules = manifest["keys_per_rule"]
            print(f"cache export: {manifest['count']} entries from {manifest['call_logs']} call logs "
                  f"({len(rules)} rules) -> {args.out}", file=sys.stderr)
        else:
            counts = import_archive(config, args.archive, args.replace)
            print(f"cache import: {counts['entries']} entries verified (sha256) from {args.archive}: "
                  f"{counts['written']} written, {counts['present']} already present in {config.paths['cache']}",
                  file=sys.stderr)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except UserError as exc:
        print(f"error: cache {args.cache_command}: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"error: cache {args.cache_command}: {exc}", file=sys.stderr)
        return 2
    return 0

