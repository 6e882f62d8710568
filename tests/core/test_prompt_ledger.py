"""The prompt ledger (aura.prompt_ledger): every instruction of a ledgered prompt traced to its paper or marked
ours with a reason, no entry left for a line that is gone, the rendered docs in step, and no new prompt without
a ledger."""
from __future__ import annotations

from pathlib import Path

import pytest

from aura.prompt_ledger import LedgerError, check, ledger_path, prompt_files, read, render, units

ROOT = Path(__file__).resolve().parents[2]
PROMPTS = ROOT / "prompts"
# Prompts written before the ledger, not traced yet (issue 48): this list only shrinks (every prompt, .md and
# .yaml, is traced now); a prompt added after it must come with its ledger.
PENDING = {
    "aura/construct": set(),
    "aura/evaluate": set(),
    "llm": set(),
    "lpsbench": set(),
    "pasbench": set(),
}

PROMPT = """---
name: toy
version: 1
variables: [answer]
---
# system
You grade the answer below. Say whether it is right.
Answer in JSON: a short rationale, then the label.
# user
{{ answer }}
"""


def _toy(tmp_path: Path, ledger: str) -> Path:
    prompt = tmp_path / "toy.v1.md"
    prompt.write_text(PROMPT)
    ledger_path(prompt).write_text(ledger)
    return prompt


def test_units_are_sentences_of_lines():
    p = PROMPTS / "pasbench" / "knowledge_probe.v3.md"
    assert "A. True (Correct)" in units(p)  # an option letter's period ends no sentence


def test_untraced_and_dangling_entries_fail(tmp_path):
    prompt = _toy(tmp_path, """entries:
  - {text: "You grade the answer below.", source: "paper §4"}
  - {text: "Answer in JSON: a short rationale, then the label.", ours: "format"}
  - {text: "{{ answer }}", source: "paper §4"}
  - {text: "Be strict.", ours: "a line since removed"}
""")
    assert check(prompt) == ["toy.v1.md: untraced: 'Say whether it is right.'",
                             "toy.v1.ledger.yaml: no longer in the prompt: 'Be strict.'"]


def test_an_entry_needs_one_origin(tmp_path):
    prompt = _toy(tmp_path, 'entries:\n  - {text: "You grade the answer below.", source: "§4", ours: "x"}\n')
    with pytest.raises(LedgerError, match="entry 1 .*exactly one of 'source' or 'ours'"):
        read(ledger_path(prompt))


def test_a_yaml_prompt_file_is_ledgered_by_its_string_values(tmp_path):
    prompt = tmp_path / "defs.v1.yaml"
    prompt.write_text("name: defs\nversion: 1\nX1:\n  name: Reach\n  definition: >-\n    How far it goes. Only direct "
                      "reach counts.\n  rules: [Look first.]\n")
    assert ledger_path(prompt).name == "defs.v1.ledger.yaml" and prompt_files(tmp_path) == [prompt]
    assert units(prompt) == ["Reach", "How far it goes.", "Only direct reach counts.", "Look first."]
    ledger_path(prompt).write_text('entries:\n  - {text: "Reach", source: "paper B.2"}\n')
    assert prompt_files(tmp_path) == [prompt] and len(check(prompt)) == 3


def _folders():
    return sorted({p.parent for p in PROMPTS.rglob("*.md")})


def _rel(folder: Path) -> str:
    return folder.relative_to(PROMPTS).as_posix()


def test_every_prompt_folder_is_named_here():
    assert {_rel(f) for f in _folders()} == set(PENDING)


@pytest.mark.parametrize("folder", _folders(), ids=_rel)
def test_every_ledgered_prompt_is_traced_and_no_new_prompt_lacks_one(folder):
    pending = PENDING[_rel(folder)]
    problems = []
    for prompt in prompt_files(folder):
        if ledger_path(prompt).is_file():
            problems += check(prompt)
        elif pending != "*" and prompt.name not in pending:
            problems.append(f"{prompt.name}: a prompt without a ledger ({ledger_path(prompt).name})")
    if pending != "*":
        problems += [f"{name}: listed as pending but gone or ledgered" for name in pending
                     if not (folder / name).is_file() or ledger_path(folder / name).is_file()]
    assert problems == []


@pytest.mark.parametrize("folder", [f for f in _folders() if any(f.glob("*.ledger.yaml"))], ids=_rel)
def test_the_rendered_ledger_is_in_step(folder):
    name = _rel(folder)
    doc = ROOT / "docs" / "prompt_ledger" / f"{name.replace('/', '-')}.md"
    assert doc.read_text() == render(folder, name) + "\n", \
        f"rerun: python -m aura.prompt_ledger prompts/{name} --title {name} --out {doc}"
