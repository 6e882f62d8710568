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
``115_1.png, 115_2.png, ...`` (1 to 4, numbered without gaps).

An item's ``n_images`` is its number of sub-images (paper Table 1: 1-4, 2.2 on average; Fig. 11 groups by
it; the prompt says "(N picture(s))"). Split files: their number. One file: upstream ships each item as ONE
composite of its 1-4 sub-images, so the count of an ``upstream`` item's single file comes from the
person-edited count file ``pasbench.data.sub_images`` (CSV ``item_id,sub_images``, optional ``image`` =
the record's file name, checked; :func:`read_sub_images`) and without that file such an item is an error;
a single file of a ``demo`` / ``constructed`` folder is one image unless the count file says otherwise.
``sub_images: detect`` reads each single file's count from its layout instead (:mod:`.layout`: gutters, or
seams at equal divisions); a composite whose layout leaves the count in doubt is then an error naming it,
and the count file is the way out (``scripts/pasbench_sub_images.py --detect`` fills in the certain ones).

Upstream's images are not in the metadata download. When none of a folder's images is there the items
stage stops with one line saying what is missing and how to supply it, unless the config opts out:
``pasbench.data.text_only: true`` (every image record left out, counted; the image figures then say
"image set not loaded") or ``images_required: false`` (records whose images are missing left out).

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
           "SUB_IMAGES_HEADER", "read_folder", "read_sub_images", "load_items", "select", "data_spec",
           "download_spec", "data_folder", "run_items", "run_fetch", "image_set_state", "IMAGE_SET_NOT_LOADED"]

TEXT_FILE = "text_eval_hugging.json"
IMAGE_FILE = "multi_modal_eval_hugging.json"
SEVERITY_FILE = "severity.json"
SOURCE_FILE = "source.txt"
IMAGE_DIRS = ("images", "combine_images")  # looked up in this order under the data folder
MAX_IMAGES = 4
DETECT = "detect"  # pasbench.data.sub_images: read each composite's count from its layout
SUB_IMAGES_HEADER = ("item_id", "sub_images")  # the count file's required columns (optional: image, note)
IMAGE_SET_NOT_LOADED = "image set not loaded"

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
            # split sub-image files: n_images = their number; one file (a composite): its 1-4 sub-images
            if not 1 <= len(self.images) <= MAX_IMAGES or not 1 <= self.n_images <= MAX_IMAGES or (
                    len(self.images) > 1 and self.n_images != len(self.images)):
                raise ValueError(f"an image item has 1-{MAX_IMAGES} images (sub-images): n_images is their number, "
                                 "its files that many split sub-images or one composite")
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
    sub_images: dict[str, Any] = field(default_factory=dict)  # the count file read: {path, sha256, rows}; {} = none


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


def _how_to_count(folder: Path, path: str | Path) -> str:
    return (f"make it with `python scripts/pasbench_sub_images.py {folder} {path}` (one row per image record) and "
            f"write each composite's number of panels (1-{MAX_IMAGES}) in its sub_images cell (--detect fills in "
            f"those its layout settles), or set pasbench.data.sub_images: {DETECT} to read them from the layouts")


def read_sub_images(path: str | Path, names: list[str], *, folder: Path | None = None) -> dict[str, int]:
    """The person-edited count file: CSV with the header ``item_id,sub_images`` (optional columns: ``image``,
    the record's file name, checked when filled; ``note``, free text; lines starting with ``#`` are comments),
    one row per image record (``names[i]`` = the ``input`` of image record i, item ``image-<i:04d>``).
    Returns ``{item_id: sub_images}``. An unknown or repeated item id, a count other than 1-4, a file name
    that is not the record's, or an image record without a row: one line naming the file and the row (the
    header is row 1, as a spreadsheet numbers it)."""
    import csv
    import io

    path = Path(path)
    if not path.is_file():
        raise PasDataError(f"{path}: the sub-image count file (pasbench.data.sub_images) does not exist; "
                           + _how_to_count(folder or Path("<data folder>"), path))
    reader = csv.reader(io.StringIO(read_utf8(path, PasDataError, "the sub-image counts").lstrip("\ufeff")))
    ids = {f"image-{i:04d}": i for i in range(len(names))}
    header, counts, first_row = None, {}, {}
    for row in reader:
        line = reader.line_num
        if not row or not "".join(row).strip() or row[0].lstrip().startswith("#"):
            continue
        cells = [c.strip() for c in row]
        if header is None:
            header = cells
            missing = [c for c in SUB_IMAGES_HEADER if c not in header]
            if missing:
                raise PasDataError(f"{path}: row {line}: the header lacks {', '.join(missing)} (expected "
                                   f"{','.join(SUB_IMAGES_HEADER)}[,image][,note]; got {','.join(cells)!r})")
            continue
        cell = dict(zip(header, cells + [""] * (len(header) - len(cells))))
        item_id, value = cell["item_id"], cell["sub_images"]
        if item_id not in ids:
            span = f"image-0000 to image-{len(names) - 1:04d}" if names else "none"
            raise PasDataError(f"{path}: row {line}: unknown item_id {item_id!r} (the image records of "
                               f"{IMAGE_FILE} are {span})")
        if item_id in counts:
            raise PasDataError(f"{path}: row {line}: item_id {item_id} again (first at row {first_row[item_id]})")
        if not re.fullmatch(rf"[1-{MAX_IMAGES}]", value):
            raise PasDataError(f"{path}: row {line} ({item_id}): sub_images {value!r} is not a whole number from 1 "
                               f"to {MAX_IMAGES}")
        name = names[ids[item_id]]
        if cell.get("image") and cell["image"] != name:
            raise PasDataError(f"{path}: row {line} ({item_id}): image {cell['image']!r} is not that record's "
                               f"input {name!r}")
        counts[item_id], first_row[item_id] = int(value), line
    if header is None:
        raise PasDataError(f"{path}: empty: expected the header {','.join(SUB_IMAGES_HEADER)} and one row per "
                           f"image record; " + _how_to_count(folder or Path("<data folder>"), path))
    absent = [k for k in ids if k not in counts]
    if absent:
        i = ids[absent[0]]
        raise PasDataError(f"{path}: no row for {absent[0]} ({IMAGE_FILE} index {i}, {names[i]}); "
                           f"{len(absent)} image record(s) without a row: one row per image record")
    return counts


def _detected(image_path: Path, recs: list, found: list, folder: Path) -> dict[str, int]:
    """``sub_images: detect``: each single-file record's count from its layout (split files count as
    themselves: the same number is put here, so the checks below pass). A composite the layout does not
    settle stops the stage, naming it and the way out."""
    from .panels import detect

    counts: dict[str, int] = {}
    for i, (rec, (paths, _)) in enumerate(zip(recs, found)):
        if not paths:
            continue
        item_id = f"image-{i:04d}"
        if len(paths) > 1 or paths[0].name != rec.input:
            counts[item_id] = len(paths)
            continue
        try:
            layout = detect(paths[0])
        except (OSError, ValueError) as exc:
            raise PasDataError(f"{image_path}: record at index {i}: {paths[0]}: not a readable image ({exc})") from None
        if layout.count is None:
            raise PasDataError(f"{image_path}: record at index {i}: {paths[0]}: its number of sub-images cannot be "
                               f"read from its layout ({layout.how}); set pasbench.data.sub_images to a count file "
                               f"instead: `python scripts/pasbench_sub_images.py --detect {folder} <counts.csv>` "
                               "fills in the counts the layout settles and leaves this one blank for you")
        counts[item_id] = layout.count
    return counts


def read_folder(folder: str | Path, *, images_dir: str | Path | None = None, images_required: bool = True,
                source: str | None = None, sub_images: str | Path | None = None,
                text_only: bool = False) -> Loaded:
    """Load and check the three upstream files of ``folder`` (text items first, then image items, each in
    file order). With ``images_required=False`` an image record whose images are missing is left out and
    listed in :attr:`Loaded.left_out` instead of being an error; with ``text_only=True`` every image record
    is (no image is looked for). When no image of the folder is found (and neither is set) the error says
    that the image set is not loaded and how to supply it. ``sub_images``: the count file
    (:func:`read_sub_images`), read when an image is found; an upstream item's single image file is a
    composite whose count must come from it; ``"detect"`` reads the counts from the layouts instead."""
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
    recs: list[_Record] = [_validate(_Record, image_path, i, raw) for i, raw in enumerate(image_raw)]
    files = {p.name: sha256_file(p) for p in (text_path, image_path, sev_path)}
    records = {"text": len(text_raw), "image": len(image_raw)}
    if text_only:
        return Loaded(items, records, [f"index {i}: text_only" for i in range(len(recs))], files)
    images = _ImageFolder(_image_folder(folder, images_dir))
    found: list[tuple[list[Path] | None, str]] = []
    for i, rec in enumerate(recs):
        try:
            found.append(images.find(rec.input))
        except ValueError as e:
            raise PasDataError(f"{image_path}: record at index {i}: {e}") from None
    if recs and images_required and all(paths is None for paths, _ in found):
        where = (f"under {images.folder}" if images.folder else
                 f"there (no {' or '.join(str(folder / d) for d in IMAGE_DIRS)} folder)")
        raise PasDataError(f"{image_path}: {IMAGE_SET_NOT_LOADED}: none of its {len(recs)} images (e.g. "
                           f"{recs[0].input}) is {where}; unzip upstream's combine_images.zip into {folder / 'images'} "
                           "(or point pasbench.data.images at its folder), or set pasbench.data.text_only: true to "
                           "run the text set alone")
    left_out: list[str] = []
    for i, (paths, why) in enumerate(found):
        if paths is None:
            if images_required:
                raise PasDataError(f"{image_path}: record at index {i}: {why} (set pasbench.data.images to the "
                                   "folder holding upstream's combine_images, or images_required: false)")
            left_out.append(f"index {i}: {why}")
    counts, counts_file = None, {}
    if sub_images == DETECT and any(paths for paths, _ in found):
        counts = _detected(image_path, recs, found, folder)
        counts_file = {"path": DETECT, "detected": len(counts), "counts": dict(sorted(counts.items()))}
    elif sub_images is not None and any(paths for paths, _ in found):
        counts = read_sub_images(sub_images, [r.input for r in recs], folder=folder)
        counts_file = {"path": str(sub_images), "sha256": sha256_file(Path(sub_images)), "rows": len(counts)}
    for i, (rec, (paths, _)) in enumerate(zip(recs, found)):
        if paths is None:
            continue
        for p in paths:
            if p.stat().st_size == 0:
                raise PasDataError(f"{image_path}: record at index {i}: image file {p} is empty")
        item_id = f"image-{i:04d}"
        if len(paths) > 1:
            n = len(paths)
            if counts is not None and counts[item_id] != n:
                raise PasDataError(f"{sub_images}: {item_id}: sub_images {counts[item_id]}, but {n} sub-image files "
                                   f"({paths[0].name} ... {paths[-1].name}) are under {paths[0].parent}")
        elif paths[0].name != rec.input:  # one split sub-image (<stem>_1.png)
            n = 1
            if counts is not None and counts[item_id] != 1:
                raise PasDataError(f"{sub_images}: {item_id}: sub_images {counts[item_id]}, but its one sub-image "
                                   f"file is {paths[0]}")
        elif counts is not None:  # the record's own file: a composite, counted by a person
            n = counts[item_id]
        elif src == "upstream":
            raise PasDataError(f"{image_path}: record at index {i}: {rec.input} is one upstream composite of "
                               f"1-{MAX_IMAGES} sub-images, whose number comes from the count file "
                               "pasbench.data.sub_images (not set): " + _how_to_count(folder, "<counts.csv>")
                               + ", and set sub_images to it")
        else:
            n = 1  # a demo / constructed folder's own single file: one image
        items.append(_item(image_path, i, "image", rec, log=None, images=[str(p) for p in paths], n_images=n,
                           severity=severity_of.get(rec.safety_knowledge), source=src))
    return Loaded(items, records, left_out, files, counts_file)


def _item(path: Path, i: int, modality: str, rec: _Record, *, log: str | None, images: list[str],
          severity: str | None, source: str, n_images: int | None = None) -> PasItem:
    try:
        return PasItem(item_id=f"{modality}-{i:04d}", modality=modality, index=i,
                       safety_knowledge=rec.safety_knowledge, condition=rec.condition_or_scenario,
                       risk_reason=rec.risk_reason, trigger=rec.risk_triggering_behavior, log=log,
                       images=images, n_images=len(images) if n_images is None else n_images, severity=severity,
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
               source: str | None = None, sub_images: str | Path | None = None,
               text_only: bool = False) -> list[PasItem]:
    """The folder's items (see :func:`read_folder`), capped by :func:`select`."""
    loaded = read_folder(folder, images_dir=images_dir, images_required=images_required, source=source,
                         sub_images=sub_images, text_only=text_only)
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
    """A fetched folder must load (images not looked at) and, when the config gives them, hold the counts."""
    loaded = read_folder(folder, text_only=True)
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
    text_only = bool(spec.get("text_only", False))
    loaded = read_folder(folder, images_dir=spec.get("images"), images_required=spec.get("images_required", True),
                         source=spec.get("source"), sub_images=spec.get("sub_images"), text_only=text_only)
    items = select(loaded.items, (raw.get("pasbench") or {}).get("max_items"))
    state = _image_set(loaded, items, text_only)
    if loaded.left_out:
        import sys
        why = "pasbench.data.text_only: true" if text_only else "their images are missing (images_required: false)"
        print(f"pasbench-items: {len(loaded.left_out)} image record(s) left out, {why}; first: {loaded.left_out[0]}",
              file=sys.stderr)
    by = {m: sum(i.modality == m for i in items) for m in ("text", "image")}
    ctx.write("items", [i.model_dump() for i in items], folder=str(folder), files=loaded.files,
              records=loaded.records, items=by, images_left_out=len(loaded.left_out), text_only=text_only,
              sub_images=loaded.sub_images, image_set=state)


def _image_set(loaded: Loaded, items: list[PasItem], text_only: bool) -> dict[str, Any]:
    """The items file's word on the image set (its provenance ``image_set``, which the stats CSVs carry on):
    ``{loaded, image_items, note}``; ``note`` is "image set not loaded (why)" when no image item is in the
    file, says how many records were left out when some were, else ""."""
    n, records, out = sum(i.modality == "image" for i in items), loaded.records["image"], len(loaded.left_out)
    if n:
        note = (f"image set partly loaded: {out} of {records} image records left out, their images are missing"
                if out else "")
        return {"loaded": True, "image_items": n, "note": note}
    why = ("pasbench.data.text_only: true" if text_only else
           f"{IMAGE_FILE} has no record" if not records else
           f"the images of its {records} records are missing (images_required: false)" if out == records else
           "pasbench.max_items.image: 0")
    return {"loaded": False, "image_items": 0, "note": f"{IMAGE_SET_NOT_LOADED} ({why})"}


def image_set_state(items_files: list[str | Path], image_items: int) -> dict[str, Any]:
    """What the stats CSVs record about the image set (their provenance ``image_set``, read by the image
    figures): the items files' own note (:func:`run_items`) when they carry one, else "not loaded" exactly
    when they hold no image item."""
    notes = []
    for path in items_files:
        sidecar = Path(f"{path}.prov.json")
        try:
            state = json.loads(sidecar.read_text(encoding="utf-8")).get("image_set") if sidecar.is_file() else None
        except (OSError, ValueError):
            state = None
        if isinstance(state, dict) and state.get("note"):
            notes.append(str(state["note"]))
    if image_items:
        return {"loaded": True, "image_items": image_items,
                "note": "; ".join(n for n in notes if not n.startswith(IMAGE_SET_NOT_LOADED))}
    note = next((n for n in notes if n.startswith(IMAGE_SET_NOT_LOADED)), None)
    return {"loaded": False, "image_items": 0, "note": note or f"{IMAGE_SET_NOT_LOADED} (the items file holds no image item)"}
