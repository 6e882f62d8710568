"""No API key in any output: the values of the keys this process knows, replaced wherever text leaves it.

A key's value is registered when the LLM layer reads it from its environment variable (and, in a stage job,
for every endpoint of the config whose variable is set). `redact` replaces each registered value with
``$<VARIABLE>`` -- so ``Bearer sk-...`` from a server that echoes the Authorization header becomes
``Bearer $OPENAI_API_KEY`` -- and is applied where text is written: error messages built from a server's
answer (llm.errors.describe), every file written through aura.io's atomic writes (outputs, summaries, call
logs), cache entries, and a stage job's stderr (the job log). Values under 8 characters are not registered:
a key that short would rewrite ordinary words, and no provider issues one.
"""
from __future__ import annotations

import contextlib
import os
import sys
from typing import TextIO

MIN_LENGTH = 8
_SECRETS: dict[str, str] = {}  # value -> the name of the environment variable it came from


def register(variable: str, value: str | None) -> None:
    if value and len(value) >= MIN_LENGTH:
        _SECRETS[value] = variable


def register_endpoints(endpoints) -> None:
    """Register the key of every endpoint that names a variable which is set."""
    for ep in endpoints:
        name = getattr(ep, "api_key_env", None)
        if name:
            register(name, os.environ.get(name))


def register_environment() -> None:
    """Register every `*_API_KEY` variable of the environment (the keys Inspect's providers read themselves)."""
    for name, value in os.environ.items():
        if name.endswith("_API_KEY"):
            register(name, value)


def redact(text: str) -> str:
    for value, variable in _SECRETS.items():
        if value in text:
            text = text.replace(value, f"${variable}")
    return text


def redact_bytes(data: bytes) -> bytes:
    return redact(data.decode("utf-8")).encode("utf-8") if _SECRETS else data


class RedactingStream:
    """A text stream (a job's stderr) whose writes pass through `redact`; everything else is the stream's."""

    def __init__(self, inner: TextIO):
        self._inner = inner

    def write(self, text: str) -> int:
        return self._inner.write(redact(text))

    def __getattr__(self, name: str):
        return getattr(self._inner, name)


@contextlib.contextmanager
def redacting_stderr():
    """Within the block, sys.stderr (a job's log under Snakemake) passes through `redact`."""
    previous = sys.stderr
    sys.stderr = RedactingStream(previous)
    try:
        yield
    finally:
        sys.stderr = previous
