"""Planted truth: what a family's simulated models answer in a dress rehearsal (``aura rehearse``).

The simulated server (``aura.simulator.server``) hands every chat request that no rule answers to a
``Responder``: the rehearsal's, which asks each enabled family's ``Planter`` in turn (the family's manifest names
its factory, ``Family.rehearsal = "module:function"``, called with the run's ``Config`` and the ``Plan``) and falls
back to a minimal answer of the request's JSON schema, or a short text.

A family plants its paper's numbers: for each reference row it can plant, its simulated models answer so that,
over the paper's items, the expected value of the statistic the run reproduces equals the reported number (a
rate p: each item's answer is drawn with ``Plan.draw(...) < p``, a deterministic draw per item from the config
seed). Where the decision is not the evaluated model's answer but a judge's, the evaluated model's simulated
answer carries a marker (``mark``) naming its draw, and the judges read it back (``read_mark``): the three judges
of a panel then agree, and the planted label is the panel's.

A ``Plan`` holds the config seed and the deviations asked for (``--deviate family:model:column=+15``: rows of that
family, model and reference column are planted that many points away from the paper).
"""
from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

from .answers import message_text, prompt_schema, schema_default


@dataclass(frozen=True)
class Request:
    """One chat request as the simulator sees it. ``model`` is the config's model name (the endpoint's
    ``model_id`` mapped back), ``text`` every message's text parts joined, ``schema`` the JSON schema of its
    ``response_format`` (None without one), ``tools`` the tools it offers (OpenAI's ``tools`` list)."""
    model: str
    body: dict
    text: str
    schema: dict | None
    tools: list

    @property
    def messages(self) -> list:
        return self.body.get("messages") or []

    @property
    def system(self) -> str:
        """The text of the first message when it is a system (or developer) message, else ''."""
        first = self.messages[0] if self.messages else {}
        if isinstance(first, dict) and first.get("role") in ("system", "developer"):
            return message_text([first])
        return ""

    @property
    def last_user(self) -> str:
        """The text of the last user message ('' when none)."""
        for msg in reversed(self.messages):
            if isinstance(msg, dict) and msg.get("role") == "user":
                return message_text([msg])
        return ""


# An answer is the server's rule outcome: {"content": str} | {"json": obj} |
# {"tool_calls": [{"name": ..., "arguments": {...}}], "content": str | None}.
Answer = dict


class Planter(Protocol):
    def answer(self, request: Request) -> Answer | None:
        """The answer to a request of this family (None: not this family's request)."""


@dataclass(frozen=True)
class Deviation:
    family: str
    model: str
    column: str
    points: float  # added to the planted value (percentage points for a rate)

    @classmethod
    def parse(cls, text: str) -> "Deviation":
        """``family:model:column=+15`` (one line naming the form when it is not)."""
        m = re.fullmatch(r"([\w.-]+):([\w.-]+):(.+)=([+-]?\d+(?:\.\d+)?)", text.strip())
        if not m:
            raise ValueError(f"--deviate {text!r}: expected family:model:column=+points, e.g. mybench:gpt-5:TS=+15")
        return cls(m.group(1), m.group(2), m.group(3), float(m.group(4)))


@dataclass(frozen=True)
class Plan:
    seed: int = 0
    deviations: tuple[Deviation, ...] = field(default_factory=tuple)

    def draw(self, *parts: Any) -> float:
        """A uniform draw in [0, 1), a deterministic function of the seed and ``parts``."""
        digest = hashlib.sha256(json.dumps([self.seed, *map(str, parts)]).encode()).digest()
        return int.from_bytes(digest[:8], "big") / 2 ** 64

    def shift(self, family: str, model: str, column: str) -> float:
        """Points added to the planted value of this family's (model, column) rows."""
        return sum(d.points for d in self.deviations if (d.family, d.model, d.column) == (family, model, column))

    def rate(self, family: str, model: str, column: str, percent: float) -> float:
        """The probability to plant for a reported percentage, deviation included, clipped to [0, 1]."""
        return min(1.0, max(0.0, (percent + self.shift(family, model, column)) / 100.0))


MARK = re.compile(r"\[sim ([\w.:/-]+)=([\w.-]+)\]")


def mark(key: str, value: str) -> str:
    """A marker a simulated answer carries so that a later request (a judge's) reads the planted value back."""
    return f"[sim {key}={value}]"


def read_mark(text: str, key: str) -> str | None:
    """The value of the last ``key`` marker in ``text`` (None when none)."""
    found = [v for k, v in MARK.findall(text) if k == key]
    return found[-1] if found else None


def request_schema(body: dict) -> dict | None:
    rf = body.get("response_format")
    if not isinstance(rf, dict) or rf.get("type") not in ("json_schema", "json_object"):
        return None
    js = rf.get("json_schema")
    if isinstance(js, dict):
        return js.get("schema") or {}
    return rf.get("schema") or {}


class Responder:
    """Answers every chat request of a rehearsal: the families' planters first, then a fallback (the schema's
    minimal value, or a short text). ``names`` maps an endpoint's ``model_id`` to the config's model name."""

    def __init__(self, planters: list[Planter], names: dict[str, str]) -> None:
        self.planters = planters
        self.names = names
        self.unplanted = 0  # requests no planter claimed

    def __call__(self, body: dict, text: str | None = None) -> Answer:
        model_id = str(body.get("model") or "")
        request = Request(model=self.names.get(model_id, model_id), body=body,
                          text=message_text(body.get("messages")) if text is None else text,
                          schema=request_schema(body), tools=body.get("tools") or [])
        for planter in self.planters:
            answer = planter.answer(request)
            if answer is not None:
                return answer
        self.unplanted += 1
        schema = request.schema if request.schema is not None else prompt_schema(request.text)
        if schema:
            return {"json": schema_default(schema)}
        return {"content": "I will proceed carefully."}


PlanterFactory = Callable[[Any, Plan], Planter]
