"""PaSBench items: a typed record, a strict loader for the upstream JSON files, and the two data stages.

Upstream (Hugging Face ``Youliang/PaSBench``) ships three JSON lists in one folder:

* ``text_eval_hugging.json``: 288 records ``safety_knowledge, condition_or_scenario, risk_reason,
  risk_triggering_behavior, input`` where ``input`` is a time-stamped observation log;
* ``multi_modal_eval_hugging.json``: 128 records of the same fields where ``input`` is an image file name
  (``"115.png"``);
* ``severity.json``: 288 records ``safety_knowledge, risk_reason, severity`` aligned index by index with
  the text file (checked: the knowledge must be the text record's).

Images are looked up in ``<folder>/images/`` (else ``<folder>/combine_images/``, the folder of upstream's
``combine_images.zip``; or a configured folder): ``115.png`` when it exists, else its sub-images
``115_1.png, 115_2.png, ...`` (1 to 4, numbered without gaps). Upstream's images are not in the metadata
download; without them a config sets ``pasbench.data.images_required: false`` and the image items are
left out (counted), or points ``pasbench.data.images`` at a folder holding them.

An image item takes the severity of the text item with the identical safety knowledge (every upstream
image record has one); the severity file itself is aligned with the text file only.

A folder may name its origin in ``source.txt`` (``demo`` | ``upstream`` | ``constructed``); without it
the items are ``upstream``.

Every error is a :class:`PasDataError`: one line naming the file and the record index; the stage writes
nothing then.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator, model_validator

from aura.config import UserError
from aura.io import read_utf8, sha256_file

__all__ = ["PasItem", "PasDataError", "Loaded", "TEXT_FILE", "IMAGE_FILE", "SEVERITY_FILE", "SOURCE_FILE",
           "read_folder", "load_items", "select", "data_spec", "download_spec", "data_folder", "run_items",
           "run_fetch"]

TEXT_FILE = "text_eval_hugging.json"
IMAGE_FILE = "multi_modal_eval_hugging.json"
SEVERITY_FILE = "severity.json"
SOURCE_FILE = "source.txt"
IMAGE_DIRS = ("images", "combine_images")  # looked up in this order under the data folder
MAX_IMAGES = 4

Severity = Literal["critical", "warning", "info"]
Source = Literal["demo", "upstream", "constructed"]


class PasDataError(UserError):
    """A PaSBench file or record could not be read or validated (one line: file and record index)."""


class PasItem(BaseModel):
    """One evaluation item (the row of ``{interim}/pasbench/items.jsonl``)."""
    model_config = ConfigDict(extra="forbid", frozen=True)

    item_id: str
    modality: Literal["text", "image"]
    index: int
    safety_knowledge: str
    condition: str
    risk_reason: str
    trigger: str
    log: str | None
    images: list[str]
    n_images: int
    severity: Severity | None
    words: int | None
    source: Source

    @model_validator(mode="after")
    def _consistent(self) -> "PasItem":
        if self.item_id != f"{self.modality}-{self.index:04d}":
            raise ValueError(f"item_id {self.item_id!r} is not '{self.modality}-{self.index:04d}'")
        if self.modality == "text":
            if self.log is None or self.images or self.n_images != 0:
                raise ValueError("a text item has a log, no images and n_images 0")
            if self.words != len(self.log.split()):
                raise ValueError(f"words {self.words} is not the log's word count {len(self.log.split())}")
        else:
            if self.log is not None or self.words is not None:
                raise ValueError("an image item has no log and no word count")
            if not 1 <= len(self.images) <= MAX_IMAGES or self.n_images != len(self.images):
                raise ValueError(f"an image item has 1-{MAX_IMAGES} images and n_images = their number")
        return self


class _Record(BaseModel):
    """One upstream record (text or image set); unknown keys are ignored, the five fields are required."""
    model_config = ConfigDict(extra="ignore", frozen=True)

    safety_knowledge: str
    condition_or_scenario: str
    risk_reason: str
    risk_triggering_behavior: str
    input: str

    @field_validator("*")
    @classmethod
    def _not_blank(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("must not be empty")
        return v


class _SeverityRecord(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)

    safety_knowledge: str
    severity: Severity


def _summarise(err: ValidationError) -> str:
    parts = [f"{'.'.join(str(x) for x in e['loc']) or '<record>'}: {e['msg']}"
             for e in err.errors(include_url=False)]
    return "; ".join(parts)


def _read_list(path: Path) -> list[Any]:
    if not path.is_file():
        raise PasDataError(f"{path}: file not found (a PaSBench folder holds {TEXT_FILE}, {IMAGE_FILE} "
                           f"and {SEVERITY_FILE})")
    try:
        data = json.loads(read_utf8(path, PasDataError))
    except json.JSONDecodeError as e:
        raise PasDataError(f"{path}: not valid JSON: {e}") from None
    if not isinstance(data, list):
        raise PasDataError(f"{path}: expected a JSON list of records, got {type(data).__name__}")
    return data


def _validate(model: type[BaseModel], path: Path, i: int, raw: Any) -> Any:
    if not isinstance(raw, dict):
        raise PasDataError(f"{path}: record at index {i} is a {type(raw).__name__}, not an object")
    try:
        return model.model_validate(raw)
    except ValidationError as e:
        raise PasDataError(f"{path}: record at index {i}: {_summarise(e)}") from None


_IMAGE_NAME = re.compile(r"(?P<stem>[^/\\]+)\.(?P<ext>png|jpe?g|webp|gif)", re.IGNORECASE)


class _ImageFolder:
    """Finds an item's image files: ``<name>`` itself, else its sub-images ``<stem>_1..n.<ext>``."""

    def __init__(self, folder: Path | None):
        self.folder = folder
        self.names = {p.name for p in folder.iterdir() if p.is_file()} if folder and folder.is_dir() else set()

    def find(self, name: str) -> tuple[list[Path] | None, str]:
        """(paths, "") when found, (None, why) when missing; a malformed set raises ValueError."""
        m = _IMAGE_NAME.fullmatch(name)
        if not m or name in (".", "..") or name.startswith("."):
            raise ValueError(f"input {name!r} is not an image file name (e.g. '115.png')")
        if self.folder is None:
            return None, f"no image folder ({' or '.join(IMAGE_DIRS)}) found"
        if name in self.names:
            return [self.folder / name], ""
        sub = re.compile(rf"{re.escape(m['stem'])}_(\d+)\.{re.escape(m['ext'])}")
        ks = sorted(int(s[1]) for n in self.names if (s := sub.fullmatch(n)))
        if not ks:
            return None, f"image {name} not found under {self.folder} (nor sub-images {m['stem']}_1.{m['ext']}, ...)"
        if ks != list(range(1, len(ks) + 1)) or len(ks) > MAX_IMAGES:
            raise ValueError(f"sub-images of {name} under {self.folder} are numbered {ks}; expected 1..n "
                             f"with n at most {MAX_IMAGES}")
        return [self.folder / f"{m['stem']}_{k}.{m['ext']}" for k in ks], ""


@dataclass
class Loaded:
    """What :func:`read_folder` found: every loadable item in file order, and what was left out."""
    items: list[PasItem]
    records: dict[str, int]          # records per upstream file kind: {"text": n, "image": n}
    left_out: list[str] = field(default_factory=list)  # "index i: why" of image records without images
    files: dict[str, str] = field(default_factory=dict)  # file name -> sha256


def _source(folder: Path) -> str:
    path = folder / SOURCE_FILE
    if not path.exists():
        return "upstream"
    value = read_utf8(path, PasDataError).strip()
    if value not in ("demo", "upstream", "constructed"):
        raise PasDataError(f"{path}: expected one of demo, upstream, constructed; got {value!r}")
    return value


def _image_folder(folder: Path, images_dir: str | Path | None) -> Path | None:
    if images_dir is not None:
        path = Path(images_dir).expanduser()
        if not path.is_dir():
            raise PasDataError(f"{path}: the configured image folder (pasbench.data.images) does not exist")
        return path
    return next((folder / d for d in IMAGE_DIRS if (folder / d).is_dir()), None)


def read_folder(folder: str | Path, *, images_dir: str | Path | None = None, images_required: bool = True,
                source: str | None = None) -> Loaded:
    """Load and check the three upstream files of ``folder`` (text items first, then image items, each in
    file order). With ``images_required=False`` an image record whose images are missing is left out and
    listed in :attr:`Loaded.left_out` instead of being an error."""
    folder = Path(folder)
    if not folder.is_dir():
        raise PasDataError(f"{folder}: the PaSBench data folder does not exist or is not a directory")
    src = source or _source(folder)
    text_path, image_path, sev_path = folder / TEXT_FILE, folder / IMAGE_FILE, folder / SEVERITY_FILE
    text_raw, image_raw, sev_raw = _read_list(text_path), _read_list(image_path), _read_list(sev_path)
    if len(sev_raw) != len(text_raw):
        raise PasDataError(f"{sev_path}: {len(sev_raw)} records, but {TEXT_FILE} has {len(text_raw)}; "
                           "severity is aligned index by index with the text set")
    items: list[PasItem] = []
    severity_of: dict[str, str] = {}
    for i, (raw, sraw) in enumerate(zip(text_raw, sev_raw)):
        rec: _Record = _validate(_Record, text_path, i, raw)
        sev: _SeverityRecord = _validate(_SeverityRecord, sev_path, i, sraw)
        if sev.safety_knowledge != rec.safety_knowledge:
            raise PasDataError(f"{sev_path}: record at index {i}: safety_knowledge differs from {TEXT_FILE} "
                               f"index {i} ({sev.safety_knowledge[:60]!r} vs {rec.safety_knowledge[:60]!r}): "
                               "not aligned")
        severity_of.setdefault(rec.safety_knowledge, sev.severity)
        items.append(_item(text_path, i, "text", rec, log=rec.input, images=[], severity=sev.severity, source=src))
    images = _ImageFolder(_image_folder(folder, images_dir))
    left_out: list[str] = []
    for i, raw in enumerate(image_raw):
        rec = _validate(_Record, image_path, i, raw)
        try:
            paths, why = images.find(rec.input)
        except ValueError as e:
            raise PasDataError(f"{image_path}: record at index {i}: {e}") from None
        if paths is None:
            if images_required:
                raise PasDataError(f"{image_path}: record at index {i}: {why} (set pasbench.data.images to the "
                                   "folder holding upstream's combine_images, or images_required: false)")
            left_out.append(f"index {i}: {why}")
            continue
        for p in paths:
            if p.stat().st_size == 0:
                raise PasDataError(f"{image_path}: record at index {i}: image file {p} is empty")
        items.append(_item(image_path, i, "image", rec, log=None, images=[str(p) for p in paths],
                           severity=severity_of.get(rec.safety_knowledge), source=src))
    files = {p.name: sha256_file(p) for p in (text_path, image_path, sev_path)}
    return Loaded(items, {"text": len(text_raw), "image": len(image_raw)}, left_out, files)


def _item(path: Path, i: int, modality: str, rec: _Record, *, log: str | None, images: list[str],
          severity: str | None, source: str) -> PasItem:
    try:
        return PasItem(item_id=f"{modality}-{i:04d}", modality=modality, index=i,
                       safety_knowledge=rec.safety_knowledge, condition=rec.condition_or_scenario,
                       risk_reason=rec.risk_reason, trigger=rec.risk_triggering_behavior, log=log,
                       images=images, n_images=len(images), severity=severity,
                       words=len(log.split()) if log is not None else None, source=source)
    except ValidationError as e:
        raise PasDataError(f"{path}: record at index {i}: {_summarise(e)}") from None


def select(items: list[PasItem], max_items: dict[str, int | None] | None) -> list[PasItem]:
    """The first N text and first M image items by upstream index (``max_items = {text: N, image: M}``;
    null or a missing key = all). Deterministic, no draw: the demo files put the severities in turn."""
    caps = max_items or {}
    bad = [k for k in caps if k not in ("text", "image")]
    if bad:
        raise PasDataError(f"pasbench.max_items: unknown modality {bad}; expected keys text, image")
    for k, v in caps.items():
        if v is not None and (type(v) is not int or v < 0):
            raise PasDataError(f"pasbench.max_items.{k}: expected a non-negative integer or null, got {v!r}")
    out, taken = [], {"text": 0, "image": 0}
    for item in items:
        cap = caps.get(item.modality)
        if cap is None or taken[item.modality] < cap:
            out.append(item)
            taken[item.modality] += 1
    return out


def load_items(folder: str | Path, max_items: dict[str, int | None] | None = None, *,
               images_dir: str | Path | None = None, images_required: bool = True,
               source: str | None = None) -> list[PasItem]:
    """The folder's items (see :func:`read_folder`), capped by :func:`select`."""
    loaded = read_folder(folder, images_dir=images_dir, images_required=images_required, source=source)
    return select(loaded.items, max_items)


# ---------------------------------------------------------------------------------------------
# config and stages


def data_spec(raw: dict[str, Any]) -> dict[str, Any]:
    """The config's ``pasbench.data`` section (``{}`` if absent)."""
    return (raw.get("pasbench") or {}).get("data") or {}


def download_spec(raw: dict[str, Any]) -> dict[str, Any] | None:
    """``pasbench.data.download`` when configured and enabled, else None."""
    spec = data_spec(raw).get("download")
    return spec if spec and spec.get("enabled", True) else None


def data_folder(raw: dict[str, Any]) -> str:
    """Where the items are read: the download's ``dest`` when a download is enabled, else ``path``."""
    spec = download_spec(raw)
    if spec:
        return spec["dest"]
    path = data_spec(raw).get("path")
    if not path:
        raise PasDataError("pasbench.data: give a folder (path) or a pinned download {url, subdir, dest, lock}")
    return path


def _check_counts(folder: Path, counts: dict[str, int] | None) -> None:
    """A fetched folder must load (images not needed) and, when the config gives them, hold the counts."""
    loaded = read_folder(folder, images_required=False)
    diffs = [f"{k}: expected {v}, found {loaded.records.get(k)}" for k, v in (counts or {}).items()
             if loaded.records.get(k) != v]
    if diffs:
        raise PasDataError(f"{folder}: record counts differ from pasbench.data.download.counts: {'; '.join(diffs)}")


def run_fetch(ctx) -> None:
    """Stage ``pasbench-fetch``: download ``pasbench.data.download.url`` into its dest, checksum pinned in
    its lock file (:func:`aura.fetch.fetch_archive`); the unpacked folder must load before it is
    installed."""
    from aura.fetch import FetchError, fetch_archive

    spec = download_spec(ctx.config.raw)
    if not spec:
        raise PasDataError("pasbench-fetch: the config has no enabled pasbench.data.download section")
    try:
        fetch_archive(spec["url"], Path(spec["dest"]), Path(spec["lock"]), spec.get("subdir"),
                      check=lambda d: _check_counts(d, spec.get("counts")))
    except (ValueError, FetchError) as exc:  # checksum, unreadable or unsafe archive
        raise PasDataError(f"pasbench-fetch: {exc}") from None


def run_items(ctx) -> None:
    """Stage ``pasbench-items``: load ``pasbench.data`` (or ``--in data_dir=``), cap by
    ``pasbench.max_items``, write ``--out items`` with the files' checksums in the provenance."""
    raw = ctx.config.raw
    spec = data_spec(raw)
    folder = ctx.inputs["data_dir"] if "data_dir" in ctx.inputs else data_folder(raw)
    loaded = read_folder(folder, images_dir=spec.get("images"), images_required=spec.get("images_required", True),
                         source=spec.get("source"))
    items = select(loaded.items, (raw.get("pasbench") or {}).get("max_items"))
    if loaded.left_out:
        import sys
        print(f"pasbench-items: {len(loaded.left_out)} image record(s) left out, their images are missing "
              f"(images_required: false); first: {loaded.left_out[0]}", file=sys.stderr)
    by = {m: sum(i.modality == m for i in items) for m in ("text", "image")}
    ctx.write("items", [i.model_dump() for i in items], folder=str(folder), files=loaded.files,
              records=loaded.records, items=by, images_left_out=len(loaded.left_out))
