"""LPS-Bench's planted truth for ``aura rehearse`` (aura.simulator.plant): its Table 3, Safe Rate per model x risk.

What it plants. The evaluator decides a case: its ``unsafe`` is unsafe, its ``safe`` is safe when the agent ended
the episode itself (evaluate.outcome). So for a (model, case of risk r) the planter draws ``Plan.draw(model,
case_id)`` (the mitigated variant: ``Plan.draw(model, case_id, "mitigated")``, the same rate: the paper's Fig. 6
numbers are not in the reference) and the case is safe when the draw is below p = ``Plan.rate("lpsbench", model,
r, <Table 3 percent>)`` (50 % for a model or risk Table 3 lacks). With ``lpsbench.broken_cases: failed`` (the
default) a cell's n also counts its cases with a broken upstream module (never run, never safe), so p is scaled by
n / run cases of that risk (capped at 1): the cell's expected Safe Rate is then the paper's.
The agent's answers carry ``mark("lps", label)`` in their text; the evaluator reads it back (``read_mark``) from
the execution record it is shown. Where the record shows no agent text (act_json mode), it draws the same way from
the record's ``# Model:`` / ``# Case:`` header lines (raw variant).

How it recognises requests (the family's own texts, the request's shape for the agent's step):

- the agent (episodes stage): its system prompt, ours (prompts/lpsbench/agent_raw, agent_clarify, agent_safety) or
  upstream's (``lpsbench.texts: upstream``: agent.py's base prompt and mitigation blocks, read from the checkout);
  raw or mitigated by which. With no assistant turn yet it calls one offered tool (the one with the fewest
  required parameters, arguments ``schema_default`` of its schema), natively, through ``act`` (single_act_tool)
  or as act JSON (act_json); after that it gives its final answer (no tool call / act ``finish``): two steps.
  The case is the one of the run's cases file (layout key ``lpsbench_cases``, read lazily, again when it changes)
  whose instruction the request carries, ties broken by the tools offered;
- the evaluator (evaluate stage): our template's system text (prompts/lpsbench/evaluator) -> ``{rationale,
  label}``; or upstream's module prompt (``evaluator/*.py`` of the checkout: every literal part in the request)
  -> ``{"status": <a word the module maps to the label>, "reasoning": ...}`` as text;
- the emulator and the simulated user (emulated back-end, ask_user extension): their prompts' system texts ->
  a short neutral text (they plant nothing).

What it cannot plant: Table 4 (Safe Rate per domain) follows from the mix of risks among a domain's cases; a model
the config does not evaluate, or a config without the raw variant, has no Table 3 cell. A mock tool of the
upstream back-end that raises on the planted arguments ends its episode ``tool_raised`` (a planted safe then
counts execution_failed). Case generation (off in the paper config) is left to the Responder's fallback.
"""
from __future__ import annotations

import hashlib

import json
import re
from functools import lru_cache
from pathlib import Path

from aura.io import read_jsonl
from aura.prompts import get_prompt
from aura.simulator.answers import schema_default
from aura.simulator.plant import Plan, Request, mark, read_mark

from .agent import ACT, FINISH
from .cases import RISKS
from .data import LpsDataError, section, texts_root
from .evaluate import LABELS

FAMILY, KEY = "lpsbench", "lps"
REFERENCE = Path(__file__).resolve().parent / "reference"
TABLE = "Table 3"
VARIANT_OF = {"agent_raw": "raw", "agent_clarify": "mitigated", "agent_safety": "mitigated"}
# evaluate.render_log's first two lines (upstream's prompt quotes the log: not at a line start)
HEADER = re.compile(r"# Model: (?P<model>[^\n]+)\n# Case: examples/(?P<domain>[^/\n]+)/(?P<rest>(?P<risk>[A-Z]+)_\w+)"
                    r"\.json")
SENTINEL = "\x00"


def _head(name: str) -> str:
    """The text a prompt's first message starts with, up to its first variable."""
    p = get_prompt(name)
    return p.render(**{v: SENTINEL for v in p.variables})[0]["content"].split(SENTINEL)[0]


@lru_cache(maxsize=1)
def reported() -> dict[tuple[str, str], float]:
    """(config model, risk code) -> Table 3's Safe Rate in percent."""
    from aura.stats.reference import load_reference

    ref = load_reference(REFERENCE)
    rows = ref[(ref["table"] == TABLE) & ref["column"].isin(list(RISKS))]
    return {(r.model, r.column): float(r.value) for r in rows.itertuples()}


def _file(path: Path, cache: dict) -> list[dict]:
    """The rows of a produced JSONL file, read again when it changed; [] while it does not exist."""
    try:
        stat = path.stat()
    except OSError:
        return []
    stamp = (stat.st_mtime_ns, stat.st_size)
    if cache.get(path, (None,))[0] != stamp:
        cache[path] = (stamp, list(read_jsonl(path)))
    return cache[path][1]


def _offered(request: Request) -> tuple[str, list[tuple[str, dict]]]:
    """(tool calling mode, [(tool name, its parameters schema)]) of an agent request."""
    fns = [t.get("function") or {} for t in request.tools if isinstance(t, dict)]
    branches = None
    if len(fns) == 1 and fns[0].get("name") == ACT:
        mode, branches = "act", (fns[0].get("parameters") or {}).get("anyOf")
    elif not fns and isinstance(request.schema, dict) and "anyOf" in request.schema:
        mode, branches = "act_json", request.schema["anyOf"]
    if branches is None:
        return "native", [(f["name"], f.get("parameters") or {}) for f in fns if f.get("name")]
    tools = [((b.get("properties") or {}).get("tool", {}).get("const"), (b.get("properties") or {}).get("arguments"))
             for b in branches if isinstance(b, dict)]
    return mode, [(n, s or {}) for n, s in tools if n and n != FINISH]


class LpsPlanter:
    """Answers the LPS-Bench family's requests of a rehearsal (module docstring)."""

    def __init__(self, config, plan: Plan) -> None:
        self.raw = getattr(config, "raw", config)
        self.plan = plan
        self.own_agent = {_head(name): variant for name, variant in VARIANT_OF.items()}
        self.own_judge, self.emulator, self.user = _head("evaluator"), _head("emulator"), _head("user_simulator")
        self._files: dict = {}  # produced files read, with their stamps
        self._modules: dict = {}  # checkout -> upstream's evaluator modules

    # -- the run's produced files and upstream's texts (lazily: they exist only once their stages ran) -------
    def _path(self, key: str) -> Path:
        from .paths import layout

        return Path(layout(self.raw)[key])

    def _root(self) -> str | None:
        try:
            return texts_root(self.raw)
        except LpsDataError:
            return None

    def _upstream_agent(self) -> dict[str, str]:
        from .upstream_texts import UpstreamTextError, agent_texts

        root = self._root()
        try:
            texts = agent_texts(root) if root else None
        except UpstreamTextError:
            return {}
        return {texts.raw: "raw", texts.clarify: "mitigated", texts.safety: "mitigated"} if texts else {}

    def _upstream_judge(self, text: str):
        """The upstream evaluator module whose prompt this request is, or None."""
        from .upstream_texts import EVALUATOR_DIR, UpstreamTextError, evaluator_text

        root = self._root()
        if root and not self._modules.get(root):  # read once the checkout is there (the fetch stage)
            self._modules[root] = []
            for path in sorted((Path(root) / EVALUATOR_DIR).glob("*.py")):
                try:
                    self._modules[root].append(evaluator_text(root, path.name))
                except UpstreamTextError:
                    continue
        for module in self._modules.get(root, []) if root else ():
            literal = [p for p in module.parts if isinstance(p, str)]
            if literal and all(p in text for p in literal):
                return module
        return None

    def _case_of(self, request: Request, offered: list[str]) -> tuple[str, str] | None:
        """(case_id, risk) of an agent request: the case whose instruction it carries, the best tool match first."""
        found = [r for r in _file(self._path("lpsbench_cases"), self._files)
                 if r["body"]["instruction"].strip() and r["body"]["instruction"].strip() in request.text]
        if not found:
            return None
        best = max(found, key=lambda r: (len(r["body"]["instruction"].strip()),
                                         len(set(r["body"]["MCP"]["tools"]) & set(offered))))
        return best["case_id"], best["risk"]

    def _scale(self, risk: str) -> float:
        """n / run cases of the risk's cell (broken cases in n, broken_cases: failed), else 1."""
        if section(self.raw).get("broken_cases", "failed") != "failed":
            return 1.0
        run = sum(r["risk"] == risk for r in _file(self._path("lpsbench_cases"), self._files))
        broken = sum(r["risk"] == risk for r in _file(self._path("lpsbench_excluded"), self._files))
        return (run + broken) / run if run else 1.0

    # -- the planted decision -----------------------------------------------------------------------------------
    def label(self, model: str, case_id: str, risk: str, variant: str = "raw") -> str:
        """safe | unsafe: the case's planted verdict (module docstring)."""
        p = self.plan.rate(FAMILY, model, risk, reported().get((model, risk), 50.0)) * self._scale(risk)
        u = self.plan.draw(model, case_id) if variant == "raw" else self.plan.draw(model, case_id, variant)
        return "safe" if u < min(p, 1.0) else "unsafe"

    # -- answers --------------------------------------------------------------------------------------------
    def answer(self, request: Request) -> dict | None:
        text = request.text
        if self.own_judge in text:
            return self._judge(request, None)
        if self.emulator in text:
            return {"content": "Done. The operation completed successfully."}
        if self.user in text:
            return {"content": "Yes, please go ahead as you planned."}
        variant = next((v for head, v in {**self.own_agent, **self._upstream_agent()}.items() if head in text), None)
        if variant is not None:
            return self._agent(request, variant)
        module = self._upstream_judge(text)
        return self._judge(request, module) if module is not None else None

    def _agent(self, request: Request, variant: str) -> dict:
        mode, tools = _offered(request)
        case = self._case_of(request, [n for n, _ in tools])
        # the planted label, and a mark of this model's own answer: two models' episodes differ, as real ones do
        # (the evaluator asked about each pays for each), though they may draw the same label
        own = mark("lps.answer", hashlib.sha256(f"{request.model}:{case}:{variant}".encode()).hexdigest()[:8])
        note = f"{mark(KEY, self.label(request.model, *case, variant))} {own}" if case else ""
        first = not any(isinstance(m, dict) and m.get("role") == "assistant" for m in request.messages)
        ours = [t for t in tools if t[0] != "ask_user"] or tools
        if first and ours:
            name, schema = min(ours, key=lambda t: len(t[1].get("required") or []))
            args = schema_default(schema) if schema else {}
            act = {"tool": name, "arguments": args}
            say = f"I will start with {name}. {note}".strip()
        else:
            name, act, say = None, {"tool": FINISH, "answer": f"Done: the task is finished. {note}".strip()}, None
        if mode == "act_json":
            return {"json": act}
        if mode == "act":
            return {"tool_calls": [{"name": ACT, "arguments": act}], "content": say or act["answer"]}
        if name is None:
            return {"content": act["answer"]}
        return {"tool_calls": [{"name": name, "arguments": args}], "content": say}

    def _judge(self, request: Request, module) -> dict:
        label = read_mark(request.text, KEY)
        if label not in LABELS:
            head = HEADER.search(request.text)
            label = self.label(head["model"].strip(), f"{head['domain']}-{head['rest']}", head["risk"]) \
                if head and head["risk"] in RISKS else "unsafe"
        why = f"The record decides it: {label}."
        if module is None:
            return {"json": {"rationale": why, "label": label}}
        words = [w for w, v in module.status_mapping.items() if v == label] + [label]
        said = [json.dumps({"status": w, "reasoning": why}) for w in words]
        return {"content": next((s for s in said if module.status(s)[0] == label), said[-1])}


def planter(config, plan: Plan) -> LpsPlanter:
    return LpsPlanter(config, plan)


def plantable(reference, config) -> list[str | None]:
    """Per reference row: None when planted (Table 3's risk cells, and its averages, means of planted cells), else
    why not."""
    raw = getattr(config, "raw", config)
    lp = section(raw)
    evaluated, raw_run = set(lp.get("evaluated") or []), "raw" in (lp.get("variants") or ("raw", "mitigated"))
    out: list[str | None] = []
    for row in reference.itertuples():
        if row.table != TABLE:
            out.append("planted by risk type; a domain's rate follows from the mix of its cases' risks")
        elif row.model not in evaluated:
            out.append(f"{row.model} is not evaluated by this config (lpsbench.evaluated)")
        elif not raw_run:
            out.append("no raw variant in lpsbench.variants: Table 3 is the raw run's")
        else:
            out.append(None)
    return out
