"""The prompt ledger: every instruction of a prompt traced to the paper it serves, or marked as ours with a reason.

A prompt tells a model what to do; an instruction the paper did not give changes what the run measures. So each
prompt file ``prompts/<family>/<name>.v<N>.md`` may carry a ledger beside it, ``<name>.v<N>.ledger.yaml``::

    entries:
      - text: "You grade the answer below."              # one unit of the prompt, verbatim
        source: "<paper> §4: 'a judge model grades each answer'"
      - text: "Answer in JSON: a short rationale, then the label."
        ours: "format: the structured answer the stage parses"

A *unit* is a sentence of a line of the prompt's system or user text (lines split at sentence ends); the
section headers (``# system``, ``# user``) and blank lines are not units, a placeholder line is one. A YAML
prompt file (``<name>.v<N>.yaml``: definitions or templates the code renders into prompts) has a ledger too
(``<name>.v<N>.ledger.yaml``); its units are the sentences of every string value, keys and the file's own
``name`` and ``version`` left out. Each entry
has exactly one of ``source`` (where the paper says it: a section, a table or figure, a line of upstream's
file) or ``ours`` (why we say it: a format the parser needs, a definition the paper leaves open, an example of
our own); a worked example is always ``ours`` and never a case of the paper. ``check`` fails a unit with no
entry and an entry whose text is no longer in the prompt, so the ledger and the prompt change together (a new
version of a prompt is a new file, and a new ledger).

``render`` writes one Markdown table per prompt for a family's docs; ``python -m aura.prompt_ledger FOLDER
[--out FILE]`` prints or writes it, and the counts per file (traced / ours / units).
"""
from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import yaml

SECTION = re.compile(r"^# (system|user)\s*$")
SENTENCE_END = re.compile(r"(?:(?<=\w\w[.?!])|(?<=[)}\"'][.?!]))\s+(?=[A-Z(\"'])")  # not after "A." or "1." (a list marker)


class LedgerError(ValueError):
    pass


@dataclass(frozen=True)
class Entry:
    text: str
    source: str | None
    ours: str | None


LEDGER_SUFFIX = ".ledger.yaml"


def ledger_path(prompt: Path) -> Path:
    return prompt.with_name(prompt.name.removesuffix(".md").removesuffix(".yaml") + LEDGER_SUFFIX)


def prompt_files(folder: Path) -> list[Path]:
    """A folder's prompt files: every ``.md`` and every ``.yaml`` that is not a ledger."""
    return sorted([*folder.glob("*.md"), *(p for p in folder.glob("*.yaml") if not p.name.endswith(LEDGER_SUFFIX))])


def _sentences(text: str) -> list[str]:
    line = " ".join(text.split())
    return [s for s in SENTENCE_END.split(line) if s] if line else []


def _yaml_units(prompt: Path) -> list[str]:
    out: list[str] = []

    def walk(value) -> None:
        if isinstance(value, dict):
            for v in value.values():
                walk(v)
        elif isinstance(value, list):
            for v in value:
                walk(v)
        elif isinstance(value, str):
            out.extend(_sentences(value))

    data = yaml.safe_load(prompt.read_text(encoding="utf-8"))
    if isinstance(data, dict):
        data = {k: v for k, v in data.items() if k not in ("name", "version")}
    walk(data)
    return out


def units(prompt: Path) -> list[str]:
    """The prompt's instructions: each sentence of each non-blank line of its text (of each string value of a
    YAML prompt file), whitespace collapsed."""
    if prompt.suffix == ".yaml":
        return _yaml_units(prompt)
    text = prompt.read_text(encoding="utf-8")
    if text.startswith("---\n"):
        text = text.split("\n---\n", 1)[1]
    out: list[str] = []
    for line in text.splitlines():
        if SECTION.match(" ".join(line.split())):
            continue
        out += _sentences(line)
    return out


def read(path: Path) -> list[Entry]:
    """A ledger file's entries; a malformed one is one LedgerError naming the file and entry."""
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise LedgerError(f"{path}: {exc}") from None
    entries = raw.get("entries") if isinstance(raw, dict) else None
    if not isinstance(entries, list):
        raise LedgerError(f"{path}: 'entries:' (a list) expected")
    out = []
    for i, e in enumerate(entries, 1):
        if not isinstance(e, dict) or not isinstance(e.get("text"), str):
            raise LedgerError(f"{path}: entry {i}: a mapping with 'text' expected")
        source, ours = e.get("source"), e.get("ours")
        if (source is None) == (ours is None) or not isinstance(source or ours, str) or not (source or ours).strip():
            raise LedgerError(f"{path}: entry {i} ({e['text'][:40]!r}): exactly one of 'source' or 'ours', "
                              "a non-empty text")
        out.append(Entry(" ".join(e["text"].split()), source, ours))
    return out


def check(prompt: Path) -> list[str]:
    """What is wrong between a prompt and its ledger: untraced units, entries whose text is gone, repeats."""
    path = ledger_path(prompt)
    if not path.is_file():
        return [f"{prompt}: no ledger ({path.name})"]
    entries = read(path)
    have = {e.text for e in entries}
    found = units(prompt)
    problems = [f"{prompt.name}: untraced: {u!r}" for u in dict.fromkeys(found) if u not in have]
    problems += [f"{path.name}: no longer in the prompt: {e.text!r}" for e in entries if e.text not in found]
    seen: set[str] = set()
    for e in entries:
        if e.text in seen:
            problems.append(f"{path.name}: listed twice: {e.text!r}")
        seen.add(e.text)
    return problems


def counts(prompt: Path) -> dict[str, int]:
    entries = {e.text: e for e in read(ledger_path(prompt))}
    found = [entries[u] for u in units(prompt) if u in entries]
    return {"units": len(units(prompt)), "traced": sum(e.source is not None for e in found),
            "ours": sum(e.ours is not None for e in found)}


def render(folder: Path, title: str | None = None) -> str:
    """Every ledgered prompt of a folder as a Markdown table (its units in order, where each comes from)."""
    lines = [f"# Prompt ledger: `{title or folder.name}`", "",
             "Written by `python -m aura.prompt_ledger` from the ledgers beside the prompts; do not edit by hand.",
             "Each instruction of each prompt, and the paper passage it serves or why it is ours.", ""]
    for prompt in prompt_files(folder):
        if not ledger_path(prompt).is_file():
            continue
        entries = {e.text: e for e in read(ledger_path(prompt))}
        c = counts(prompt)
        lines += [f"## `{prompt.name}`", "", f"{c['units']} instructions: {c['traced']} traced to the paper, "
                  f"{c['ours']} ours.", "", "| instruction | from |", "|---|---|"]
        for u in units(prompt):
            e = entries.get(u)
            where = "**untraced**" if e is None else (e.source if e.source is not None else f"*ours*: {e.ours}")
            lines.append(f"| {_cell(u)} | {_cell(where)} |")
        lines.append("")
    return "\n".join(lines)


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m aura.prompt_ledger")
    ap.add_argument("folder", type=Path, help="a family's prompt folder, e.g. prompts/<family>")
    ap.add_argument("--out", type=Path, default=None, help="write the rendered ledger here (else print it)")
    ap.add_argument("--title", default=None, help="the heading's name (default: the folder's name)")
    args = ap.parse_args(argv)
    try:
        problems = [p for prompt in prompt_files(args.folder) for p in check(prompt)
                    if ledger_path(prompt).is_file()]
        text = render(args.folder, args.title)
    except LedgerError as exc:
        print(f"prompt ledger: {exc}", file=sys.stderr)
        return 2
    for p in problems:
        print(f"prompt ledger: {p}", file=sys.stderr)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")
    else:
        print(text)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
