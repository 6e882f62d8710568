"""Questions for the real embedded engine (llama.cpp's server: the xllamacpp wheel or the compiled llama-server),
asked over its HTTP API: how many tokens a conversation takes in the model's context, and whether the engine
accepts a JSON schema as an answer constraint.

    with EmbeddedEngine() as engine:
        engine.prompt_tokens(messages); engine.accepts_schema(schema)

Tests that use it skip when this environment's engine is llama-cpp-python's server (the bootstrap's last resort).
AURA_REQUIRE_ENGINE=<engine> (CI sets xllamacpp, the engine a user's bootstrap installs) makes them fail instead,
and fail on any other engine."""
from __future__ import annotations

import json
import os
import urllib.error
import urllib.request

import pytest

from aura.config import load_config
from aura.llm.llama_engine import SERVER_ENGINES, schema_grammar
from aura.llm.local_server import LocalServer
from conftest import REPO


REQUIRED = os.environ.get("AURA_REQUIRE_ENGINE")  # the engine this environment must have (CI: xllamacpp)


def not_here(reason: str) -> None:
    """Skip a test that needs llama.cpp's server, or fail it where the environment must have it."""
    if REQUIRED:
        pytest.fail(f"{reason} (AURA_REQUIRE_ENGINE={REQUIRED}; the bootstrap's last line says which it installed)")
    pytest.skip(reason)


class EmbeddedEngine:
    def __init__(self):
        self.cfg = load_config(REPO / "config/config.yaml")
        self.server = LocalServer(self.cfg.endpoints["local"].local)
        if self.server.engine not in SERVER_ENGINES or (REQUIRED and self.server.engine != REQUIRED):
            not_here(f"the embedded engine here is {self.server.engine}")

    def __enter__(self) -> "EmbeddedEngine":
        self.server.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.stop()

    @property
    def n_ctx(self) -> int:
        return self.cfg.endpoints["local"].local.n_ctx

    def _post(self, path: str, body: dict) -> tuple[int, dict]:
        root = self.server.base_url.removesuffix("/v1")
        req = urllib.request.Request(root + path, data=json.dumps(body).encode(), method="POST",
                                     headers={"Authorization": f"Bearer {self.server.token}",
                                              "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=120) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read() or b"{}")

    def prompt_tokens(self, messages: list[dict]) -> int:
        """Tokens of the prompt the server builds from `messages` with the model's own chat template."""
        status, templated = self._post("/apply-template", {"messages": messages})
        assert status == 200, templated
        status, tokens = self._post("/tokenize", {"content": templated["prompt"], "add_special": True})
        assert status == 200, tokens
        return len(tokens["tokens"])

    def accepts_schema(self, schema: dict) -> str | None:
        """None when the server takes `schema` as a constraint on an answer (one token generated), else its error:
        as the default config's local endpoint sends it (gbnf_schema: the engine's compact grammar)."""
        if self.cfg.endpoints["local"].structured_output == "gbnf_schema":
            constraint = {"grammar": schema_grammar(schema, self.server.engine)}
        else:
            constraint = {"response_format": {"type": "json_object", "schema": schema}}
        status, body = self._post("/v1/chat/completions", {
            "model": "local", "messages": [{"role": "user", "content": "Answer."}], "max_tokens": 1, **constraint})
        return None if status == 200 else f"HTTP {status}: {body.get('error', body)}"
