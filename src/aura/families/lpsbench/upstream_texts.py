"""Upstream's own texts, read at run time from the pinned LPS-Bench checkout (never copied into this repository).

``lpsbench.texts: upstream`` (the paper config) makes the agent and the evaluator use them:

- ``agent.py``, function ``get_system_prompt``: the string ``base_prompt`` (the raw prompt, paper Fig. 21), the
  line it appends when its marker (``"llama"``) is in the model name, and the two comment blocks headed
  ``Mitigation (... Benign Risks):`` (Fig. 22) and ``Mitigation (... Adversarial Risks):`` (Fig. 23), read with
  ``tokenize`` (they are comments upstream);
- ``evaluator/<module>.py`` (the case's ``evaluator.file``): the f-string ``prompt`` with its two placeholders
  ``execution_log`` and ``criterion_text``, the ``status_mapping`` dict and the two keyword lists that normalise
  the verdict, read with ``ast`` (never imported).

The archive's sha256 (lpsbench.lock.json) pins these texts; a file that is missing, or whose text is not where
upstream has it, is an ``UpstreamTextError``: one line naming the file.
"""
from __future__ import annotations

import ast
import io
import re
import tokenize
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from aura.config import UserError
from aura.io import sha256_text

AGENT_FILE = "agent.py"
EVALUATOR_DIR = "evaluator"
PLACEHOLDERS = ("execution_log", "criterion_text")
HEADER = re.compile(r"^Mitigation \((?P<title>.+)\):$")
# which comment block is which: the words of its header
BLOCKS = {"clarify": "Benign Risks", "safety": "Adversarial Risks"}


class UpstreamTextError(UserError):
    """An upstream text that cannot be read (one line naming the file)."""


@dataclass(frozen=True)
class AgentTexts:
    raw: str  # base_prompt
    clarify: str  # the benign mitigation block (Fig. 22)
    safety: str  # the adversarial mitigation block (Fig. 23)
    llama_marker: str  # lower-case substring of the model name that adds llama_line
    llama_line: str
    file: str

    def system(self, which: str, model_name: str) -> str:
        """The system prompt `which` (raw | clarify | safety) for a model, with the Llama line as upstream adds it."""
        text = getattr(self, which)
        return text + self.llama_line if self.llama_marker in model_name.lower() else text


@dataclass(frozen=True)
class EvaluatorText:
    parts: tuple[str | tuple[str], ...]  # literal text, or (placeholder,)
    status_mapping: dict[str, str]
    safe_words: tuple[str, ...]
    unsafe_words: tuple[str, ...]
    file: str

    @property
    def sha256(self) -> str:
        return sha256_text(repr((self.parts, sorted(self.status_mapping.items()), self.safe_words, self.unsafe_words)))

    def render(self, execution_log: str, criterion_text: str) -> str:
        values = {"execution_log": execution_log, "criterion_text": criterion_text}
        return "".join(p if isinstance(p, str) else values[p[0]] for p in self.parts)

    def status(self, answer: str | None) -> tuple[str, str | None]:
        """(label, reasoning) from the evaluator's free-text answer, as upstream's module reads it: the JSON between
        the first '{' and the last '}', its `status` normalised by the mapping, else by the keyword lists, else
        execution_failed; no JSON, or no `status`: ('unparsed', None)."""
        import json

        text = answer or ""
        start, end = text.find("{"), text.rfind("}") + 1
        if start == -1 or end == 0:
            return "unparsed", None
        try:
            parsed = json.loads(text[start:end])
        except ValueError:
            return "unparsed", None
        if not isinstance(parsed, dict) or not isinstance(parsed.get("status"), str):
            return "unparsed", None
        word = parsed["status"].lower().strip()
        reasoning = parsed.get("reasoning")
        if word in self.status_mapping:
            return self.status_mapping[word], reasoning
        if any(w in word for w in self.safe_words):
            return "safe", reasoning
        if any(w in word for w in self.unsafe_words):
            return "unsafe", reasoning
        return "execution_failed", reasoning


def _source(path: Path) -> tuple[str, ast.Module]:
    try:
        text = path.read_text(encoding="utf-8")
        return text, ast.parse(text)
    except (OSError, UnicodeDecodeError, SyntaxError) as exc:
        raise UpstreamTextError(f"{path}: cannot read upstream's text ({type(exc).__name__}: "
                                f"{' '.join(str(exc).split())})") from None


def _function(tree: ast.Module, path: Path, name: str) -> ast.FunctionDef:
    found = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name]
    if len(found) != 1:
        raise UpstreamTextError(f"{path}: no function {name} (upstream's texts are not where f30cc91 has them)")
    return found[0]


def _comment_blocks(text: str, first: int, last: int) -> dict[str, str]:
    """Header title -> the comment lines under it (their '# ' cut), for the comments on lines first..last."""
    blocks: dict[str, list[str]] = {}
    current = None
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type != tokenize.COMMENT or not first <= tok.start[0] <= last:
            continue
        line = tok.string[1:]
        line = line[1:] if line.startswith(" ") else line
        head = HEADER.match(line.strip())
        if head:
            current = blocks.setdefault(head["title"], [])
        elif current is not None:
            current.append(line.rstrip())
    return {title: "\n".join(lines).strip("\n") for title, lines in blocks.items()}


@lru_cache(maxsize=8)
def agent_texts(root: str) -> AgentTexts:
    path = Path(root) / AGENT_FILE
    text, tree = _source(path)
    fn = _function(tree, path, "get_system_prompt")
    base = [n.value.value for n in ast.walk(fn) if isinstance(n, ast.Assign) and isinstance(n.value, ast.Constant)
            and [ast.unparse(t) for t in n.targets] == ["base_prompt"] and isinstance(n.value.value, str)]
    marker = line = None
    for node in ast.walk(fn):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Compare) and \
                isinstance(node.test.left, ast.Constant) and isinstance(node.test.left.value, str):
            ret = node.body[0] if node.body and isinstance(node.body[0], ast.Return) else None
            if ret and isinstance(ret.value, ast.BinOp) and isinstance(ret.value.right, ast.Constant):
                marker, line = node.test.left.value.lower(), ret.value.right.value
    blocks = _comment_blocks(text, fn.lineno, fn.end_lineno)
    found = {k: [b for t, b in blocks.items() if words in t] for k, words in BLOCKS.items()}
    missing = ([] if len(base) == 1 else ["base_prompt"]) + ([] if marker and isinstance(line, str) else
                                                             ["the Llama line"]) + \
        [f"the comment block 'Mitigation (... {BLOCKS[k]}):'" for k, b in found.items() if len(b) != 1 or not b[0]]
    if missing:
        raise UpstreamTextError(f"{path}: get_system_prompt lacks {', '.join(missing)} "
                                "(upstream's texts are not where f30cc91 has them)")
    return AgentTexts(raw=base[0], clarify=found["clarify"][0], safety=found["safety"][0], llama_marker=marker,
                      llama_line=line, file=str(path))


def _str_list(node: ast.AST) -> tuple[str, ...] | None:
    if isinstance(node, ast.List) and node.elts and all(isinstance(e, ast.Constant) and isinstance(e.value, str)
                                                        for e in node.elts):
        return tuple(e.value for e in node.elts)
    return None


@lru_cache(maxsize=32)
def evaluator_text(root: str, file: str) -> EvaluatorText:
    """The evaluator module `file` (a case's ``evaluator.file``) under ``<root>/evaluator/``."""
    path = Path(root) / EVALUATOR_DIR / Path(file).name
    _, tree = _source(path)
    prompts = [n for n in ast.walk(tree) if isinstance(n, ast.Assign) and isinstance(n.value, ast.JoinedStr)
               and [ast.unparse(t) for t in n.targets] == ["prompt"]]
    mappings = [n.value for n in ast.walk(tree) if isinstance(n, ast.Assign) and isinstance(n.value, ast.Dict)
                and [ast.unparse(t) for t in n.targets] == ["status_mapping"]]
    words = [w for n in ast.walk(tree) if isinstance(n, ast.comprehension) for w in [_str_list(n.iter)] if w]
    problem = None
    if len(prompts) != 1:
        problem = f"{len(prompts)} f-string assignments to `prompt` (expected 1)"
    elif len(mappings) != 1:
        problem = f"{len(mappings)} `status_mapping` dicts (expected 1)"
    elif len(words) != 2:
        problem = f"{len(words)} keyword lists of the verdict (expected 2: safe, unsafe)"
    if problem is None:
        parts: list = []
        for v in prompts[0].value.values:
            if isinstance(v, ast.Constant):
                parts.append(v.value)
            elif isinstance(v, ast.FormattedValue) and isinstance(v.value, ast.Name) and v.conversion == -1 \
                    and v.format_spec is None and v.value.id in PLACEHOLDERS:
                parts.append((v.value.id,))
            else:
                problem = f"the prompt's placeholder {ast.unparse(v.value)} is not one of {list(PLACEHOLDERS)}"
                break
        if problem is None and {p[0] for p in parts if isinstance(p, tuple)} != set(PLACEHOLDERS):
            problem = f"the prompt lacks a placeholder of {list(PLACEHOLDERS)}"
        try:
            mapping = ast.literal_eval(mappings[0])
        except ValueError:
            problem = problem or "status_mapping is not a literal"
    if problem:
        raise UpstreamTextError(f"{path}: {problem} (upstream's evaluator text is not where f30cc91 has it)")
    return EvaluatorText(parts=tuple(parts), status_mapping=dict(mapping), safe_words=words[0], unsafe_words=words[1],
                         file=str(path))


@dataclass(frozen=True)
class UpstreamPrompt:
    """An agent system prompt of upstream's, shaped as the agent loop uses a prompt (ref, sha256, render)."""

    name: str  # raw | clarify | safety
    system_text: str
    file: str

    @property
    def ref(self) -> str:
        return f"upstream:{AGENT_FILE}:{self.name}"

    @property
    def sha256(self) -> str:
        return sha256_text(self.system_text)

    def render(self, instruction: str) -> list[dict]:
        """System prompt as upstream passes it to its agent (unstripped), the instruction as the user message."""
        return [{"role": "system", "content": self.system_text}, {"role": "user", "content": instruction}]


# our prompt names (spec.AgentSettings.prompt) -> upstream's text of the same role
ROLE_OF = {"agent_raw": "raw", "agent_clarify": "clarify", "agent_safety": "safety"}


def agent_prompt(root: str, prompt_name: str, model_name: str) -> UpstreamPrompt:
    texts = agent_texts(root)
    which = ROLE_OF[prompt_name]
    return UpstreamPrompt(name=which, system_text=texts.system(which, model_name), file=texts.file)


# ---- case generation: the per-risk prompt templates (paper Figs. 7-15) ----------------------------------------
TEMPLATE_DIR = "prompt"
DOMAIN_SLOT = "<BROAD DOMAIN> <CONCRETE SCENARIO>"  # where upstream's templates take the domain and scenario


def generation_template(root: str, risk: str) -> tuple[str, str]:
    """(text, file) of upstream's template ``prompt/<RISK>.md``, with its domain line's placeholder kept for the
    caller to fill; a missing file, or one without the placeholder, is an UpstreamTextError."""
    path = Path(root) / TEMPLATE_DIR / f"{risk}.md"
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UpstreamTextError(f"{path}: cannot read upstream's generation template ({type(exc).__name__})") from None
    if text.count(DOMAIN_SLOT) != 1:
        raise UpstreamTextError(f"{path}: no single '{DOMAIN_SLOT}' (upstream's template is not as f30cc91 has it)")
    return text, str(path)
