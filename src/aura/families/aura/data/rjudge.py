"""Typed R-Judge records and a strict, deterministic loader.

R-Judge (Yuan et al., 2024) ships one JSON list per file under ``<root>/<Domain>/<file>.json``.
Each record holds a multi-turn tool-use trajectory: ``contents`` is a list of turns, each turn a
list of messages with ``role`` in {user, agent, environment}. The domain is taken from the folder
name (it is not stored in the JSON), and every record gets a stable ``seed_id``
``"{domain}/{file stem}/{id}"``.

Observed in the shared copy (571 records): user ``content`` is null in 14 records, agent ``thought``
is null in 25 messages and agent ``action`` in 2, environment ``content`` in 135. The models below
therefore accept ``None`` for those fields, but the keys themselves must be present.

AURA-Eval uses the ``attack_type == "unintended"`` subset (157 records); see
:func:`select_unintended`.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Annotated, Any, Iterable, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from aura.config import UserError
from aura.io import read_utf8

__all__ = [
    "UserMsg",
    "AgentMsg",
    "EnvMsg",
    "Msg",
    "RJudgeRecord",
    "RecordError",
    "load_rjudge",
    "select_unintended",
    "counts",
    "DOMAINS",
]

#: The five R-Judge domains, in the order the paper lists them.
DOMAINS: tuple[str, ...] = ("Program", "Application", "IoT", "Web", "Finance")


class RecordError(UserError):
    """A source file or record could not be read or validated (one line: file and record)."""


class _Base(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class UserMsg(_Base):
    role: Literal["user"]
    content: str | None


class AgentMsg(_Base):
    role: Literal["agent"]
    thought: str | None
    action: str | None


class EnvMsg(_Base):
    role: Literal["environment"]
    content: str | None


Msg = Annotated[Union[UserMsg, AgentMsg, EnvMsg], Field(discriminator="role")]


class RJudgeRecord(_Base):
    id: int | str
    scenario: str
    profile: str
    goal: str | None = None
    contents: list[list[Msg]]
    label: Literal[0, 1]
    risk_description: str
    attack_type: str
    # Set by the loader, never taken from the JSON.
    domain: str
    source_file: str

    @field_validator("id", mode="before")
    @classmethod
    def _id_not_bool(cls, v: Any) -> Any:
        if isinstance(v, bool):
            raise ValueError("id must be an int or a string, not a bool")
        return v

    @field_validator("contents")
    @classmethod
    def _no_empty_turns(cls, v: list[list[Any]]) -> list[list[Any]]:
        # an empty trajectory or turn loads but leaves later stages nothing to truncate or render
        if not v:
            raise ValueError("contents is empty: a record needs at least one turn")
        empty = [i for i, turn in enumerate(v) if not turn]
        if empty:
            raise ValueError(f"turn(s) {empty} of contents are empty: every turn needs a message")
        return v

    @field_validator("label", mode="before")
    @classmethod
    def _label_exact_int(cls, v: Any) -> Any:
        # Literal[0, 1] alone would accept True and 1.0; R-Judge labels are plain ints.
        if type(v) is not int:
            raise ValueError(f"label must be the integer 0 or 1, got {v!r}")
        return v

    @property
    def seed_id(self) -> str:
        """Stable identifier ``"{domain}/{source file stem}/{id}"``, e.g. ``"IoT/harmful/7"``."""
        return f"{self.domain}/{Path(self.source_file).stem}/{self.id}"

    @property
    def messages(self) -> list[UserMsg | AgentMsg | EnvMsg]:
        """All messages of all turns, flattened in order."""
        return [m for turn in self.contents for m in turn]


def _summarise(err: ValidationError) -> str:
    parts = []
    for e in err.errors(include_url=False):
        loc = ".".join(str(x) for x in e["loc"]) or "<record>"
        parts.append(f"{loc}: {e['msg']}")
    return f"{err.error_count()} validation error(s): " + "; ".join(parts)


class _Object(dict):
    """A JSON object that remembers the keys it held more than once (json keeps the last)."""

    duplicates: tuple[str, ...] = ()


def _object(pairs: list[tuple[str, Any]]) -> _Object:
    obj = _Object(pairs)
    if len(obj) < len(pairs):
        seen: set[str] = set()
        obj.duplicates = tuple(dict.fromkeys(k for k, _ in pairs if k in seen or seen.add(k)))
    return obj


def _duplicate_keys(value: Any, where: str = "") -> list[str]:
    """Paths of keys given twice anywhere inside a record, e.g. ``contents.0.1.action``."""
    found = []
    if isinstance(value, _Object):
        found += [f"{where}{k}" for k in value.duplicates]
        for k, v in value.items():
            found += _duplicate_keys(v, f"{where}{k}.")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            found += _duplicate_keys(v, f"{where}{i}.")
    return found


def _read_file(path: Path, rel: str, domain: str) -> list[RJudgeRecord]:
    text = read_utf8(path, RecordError)
    try:
        data = json.loads(text, object_pairs_hook=_object)
    except json.JSONDecodeError as e:
        raise RecordError(f"{path}: not valid JSON: {e}") from None
    if not isinstance(data, list):
        raise RecordError(f"{path}: expected a JSON list of records, got {type(data).__name__}")
    out = []
    for i, raw in enumerate(data):
        if not isinstance(raw, dict):
            raise RecordError(f"{path}: record at index {i} is a {type(raw).__name__}, not an object")
        where = f"record id={raw['id']!r} (index {i})" if "id" in raw else f"record at index {i} (no id)"
        dups = _duplicate_keys(raw)
        if dups:
            raise RecordError(f"{path}: {where}: duplicate key(s) {', '.join(dups)} (JSON keeps only the last)")
        try:
            rec = RJudgeRecord.model_validate({**raw, "domain": domain, "source_file": rel})
        except ValidationError as e:
            raise RecordError(f"{path}: {where}: {_summarise(e)}") from None
        out.append(rec)
    return out


def load_rjudge(root: Path | str) -> list[RJudgeRecord]:
    """Load and validate every ``<root>/<Domain>/*.json``.

    Domains and files are read in sorted order, records in file order, so the result is
    deterministic. JSON files directly under ``root`` (e.g. ``benign.json``,
    ``multi_turn_statistics.json``) and hidden folders are ignored.

    Raises :class:`RecordError` for a file that is not a JSON list, for a malformed record (the
    message names the file, the record id or index, and the validation errors), and for two
    records with the same ``seed_id`` (the message names both locations).
    """
    root = Path(root)
    if not root.is_dir():
        raise RecordError(f"{root}: the seed folder does not exist or is not a directory")
    records: list[RJudgeRecord] = []
    seen: dict[str, str] = {}
    for domain_dir in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith((".", "_"))):
        for path in sorted(domain_dir.glob("*.json")):
            rel = path.relative_to(root).as_posix()
            for i, rec in enumerate(_read_file(path, rel, domain_dir.name)):
                here = f"{path} (index {i})"
                if rec.seed_id in seen:
                    raise RecordError(
                        f"duplicate seed_id {rec.seed_id!r}: {seen[rec.seed_id]} and {here}"
                    )
                seen[rec.seed_id] = here
                records.append(rec)
    return records


def select_unintended(records: Iterable[RJudgeRecord]) -> list[RJudgeRecord]:
    """Keep the records with ``attack_type == "unintended"`` (the AURA-Eval seed pool)."""
    return [r for r in records if r.attack_type == "unintended"]


def counts(records: Iterable[RJudgeRecord]) -> dict[str, Any]:
    """Summary counts: ``{"total": n, "by_domain": {...}, "by_label": {0: .., 1: ..},
    "by_attack_type": {...}}`` (keys sorted)."""
    records = list(records)
    dom = Counter(r.domain for r in records)
    lab = Counter(r.label for r in records)
    att = Counter(r.attack_type for r in records)
    return {
        "total": len(records),
        "by_domain": dict(sorted(dom.items())),
        "by_label": dict(sorted(lab.items())),
        "by_attack_type": dict(sorted(att.items())),
    }
