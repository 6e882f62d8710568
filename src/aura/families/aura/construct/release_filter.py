"""The final release exclusions (paper §4 / C.3: "final exclusions for malformed or underspecified
source requests"), applied by finalize to every candidate row, source and counterpart alike.

Automatic checks look at the row's source request: the first [USER] step of its prefix with text.
They are deterministic string rules, checked in this order (the first that fails names the reason):

- no_user_request: the prefix has no [USER] step at all.
- empty_request: every [USER] step of the prefix is empty or whitespace only.
- garbled_request: the request holds a U+FFFD replacement character, a control character other
  than tab / newline / carriage return, an unfilled `{{ placeholder }}`, or fewer than half of its
  non-space characters are letters (an encoded blob, a dump of symbols or numbers).
- truncated_request: the request ends in an ellipsis ("..." or "…"), leaves a bracket ( [ { open,
  has an odd number of double quotes or backticks, or its last word (no closing punctuation after
  it) is one that cannot end a request ("and", "to", "the", "with", ...).
- no_actionable_task: fewer than two words of two or more letters, or only greetings,
  acknowledgements and fillers ("hi", "thanks", "ok", ...), so no task is stated.

The manual exclusion file (`aura.construct.exclusions_file`) is a CSV with columns `id`, `reason` or a
JSONL of objects with those keys; `id` is an item id (it_...), an item key (prefix id @ dimension,
`~pair` for a counterpart) or a seed id (every row of that seed). Each listed id must match at least
one candidate row. Any problem is a ReleaseFilterError naming the file and the row.
"""
from __future__ import annotations

import json
import re
import unicodedata
from pathlib import Path

import pandas as pd

AUTO_REASONS = ("no_user_request", "empty_request", "garbled_request", "truncated_request", "no_actionable_task")
PLACEHOLDER = re.compile(r"\{\{\s*[A-Za-z_][\w ]*\}\}")
WORD = re.compile(r"[^\W\d_]{2,}")
# Words a request cannot end on. Not here, although they often dangle: words that also end a request
# ("turn the lights on", "log me in", "send it to her", "help me with that", "tell me who").
DANGLING = frozenset("a an and or but nor to the of with for from at by as whose than if because into onto via "
                     "my your our their its".split())
FILLERS = frozenset("hi hello hey yo thanks thank thx you ok okay yes yeah no nope sure bye goodbye good morning "
                    "afternoon evening night great cool nice fine please test testing hmm".split())
BRACKETS = ("()", "[]", "{}")


class ReleaseFilterError(ValueError):
    pass


def _garbled(text: str) -> bool:
    if "\ufffd" in text or PLACEHOLDER.search(text):
        return True
    if any(unicodedata.category(c) == "Cc" and c not in "\t\n\r" for c in text):
        return True
    visible = [c for c in text if not c.isspace()]
    return sum(c.isalpha() for c in visible) < len(visible) / 2


def _truncated(text: str) -> bool:
    if text.endswith(("...", "…")):
        return True
    for open_, close in BRACKETS:  # a bracket left open (a closer without an opener is a list mark or ":)")
        if text.count(open_) > text.count(close):
            return True
    if text.count('"') % 2 or text.count("`") % 2:
        return True
    last = text.split()[-1]  # the last word itself: "set it to 68" ends on a number, not on "to"
    return last.isalpha() and last.lower() in DANGLING


def _no_task(text: str) -> bool:
    words = [w.lower() for w in WORD.findall(text)]
    # scripts written without spaces (Chinese, Japanese, Thai): a run of such letters is several words
    n = sum(len(w) // 2 if any(unicodedata.category(c) == "Lo" for c in w) else 1 for w in words)
    return n < 2 or all(w in FILLERS for w in words)


def request_problem(steps: list[dict]) -> str | None:
    """The automatic release check of one row's prefix: the reason code, or None when it passes."""
    if not any(s["role"] == "user" for s in steps):
        return "no_user_request"
    text = next((s["content"].strip() for s in steps if s["role"] == "user" and (s.get("content") or "").strip()), "")
    if not text:
        return "empty_request"
    if _garbled(text):
        return "garbled_request"
    if _truncated(text):
        return "truncated_request"
    if _no_task(text):
        return "no_actionable_task"
    return None


def read_exclusion_file(path: Path) -> list[dict]:
    """The person-edited exclusion list: [{id, reason, where}], `where` naming file and row for errors."""
    path = Path(path)
    if not path.is_file():
        raise ReleaseFilterError(f"{path}: exclusion file not found")
    if path.suffix == ".jsonl":
        entries = []
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ReleaseFilterError(f"{path}: line {n}: not valid JSON ({exc.msg})") from None
            if not isinstance(obj, dict):
                raise ReleaseFilterError(f"{path}: line {n}: expected an object with id and reason")
            entries.append({"id": obj.get("id"), "reason": obj.get("reason"), "where": f"{path}: line {n}"})
    elif path.suffix == ".csv":
        try:
            df = pd.read_csv(path, dtype=str, keep_default_na=False)
        except (pd.errors.EmptyDataError, pd.errors.ParserError) as exc:
            raise ReleaseFilterError(f"{path}: cannot read the exclusion CSV: {exc}") from None
        missing = [c for c in ("id", "reason") if c not in df.columns]
        if missing:
            raise ReleaseFilterError(f"{path}: missing column(s) {missing}; expected id, reason")
        entries = [{"id": r["id"], "reason": r["reason"], "where": f"{path}: row {i + 2}"} for i, r in df.iterrows()]
    else:
        raise ReleaseFilterError(f"{path}: exclusion file must be .csv or .jsonl")
    seen: dict[str, str] = {}
    for e in entries:
        for field in ("id", "reason"):
            if not isinstance(e[field], str) or not e[field].strip():
                raise ReleaseFilterError(f"{e['where']}: {field} is missing or empty")
        e["id"], e["reason"] = e["id"].strip(), e["reason"].strip()
        if e["id"] in seen:
            raise ReleaseFilterError(f"{e['where']}: id {e['id']!r} is already listed at {seen[e['id']]}")
        seen[e["id"]] = e["where"]
    return entries


def match_manual(entries: list[dict], rows: list[dict]) -> dict[str, dict]:
    """item_id -> the entry that excludes it. An entry matching no candidate row is an error."""
    out: dict[str, dict] = {}
    for e in entries:
        hit = [r for r in rows if e["id"] in (r["item_id"], r["item_key"], r["seed_id"])]
        if not hit:
            raise ReleaseFilterError(f"{e['where']}: id {e['id']!r} matches no candidate row "
                                     "(item id, item key or seed id)")
        for r in hit:
            out.setdefault(r["item_id"], e)
    return out
