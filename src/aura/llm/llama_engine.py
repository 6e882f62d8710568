"""Which program serves the embedded model, and how it is started.

Two engines speak the same OpenAI-compatible HTTP API on 127.0.0.1:

* ``llama-server``: llama.cpp's own server, a C++ binary that ``scripts/bootstrap.sh`` builds from the
  llama.cpp sources shipped in llama-cpp-python's sdist on PyPI and installs under ``<venv>/llama.cpp/bin``
  (with ``BUILD.json``: sources, their sha256, build flags). It serves ``slots`` requests at once with
  continuous batching, constrains answers to a GBNF grammar or a JSON schema, keeps a RAM cache of earlier
  prompts' KV states, and reports ``timings`` and ``usage.prompt_tokens_details.cached_tokens`` itself.
* ``llama-cpp-python``: the Python bindings' server app (``aura.llm.llama_server_process``), one request at a
  time. The bootstrap installs it only when the binary cannot be built.

``local.engine: auto`` (the default) takes the binary when it is there, else the Python server. The
environment variable ``AURA_LLAMA_SERVER`` names another llama-server binary (e.g. a GPU build).

Answer schemas as grammars (``structured_output: gbnf_schema``, `schema_grammar`): llama-server turns a
``response_format`` schema into a grammar that lets JSON spread over lines with indentation, and a small model then
writes pretty-printed JSON, newline and indentation tokens included (in the default run, relevance answers of 240-300
tokens that list one code per indented line, where the compact grammar gets `{ "relevant": [] }`). The Python
engine's converter (``llama_cpp/llama_grammar.py``, the same sdist) allows single spaces only. The bootstrap
installs that one pure-Python file beside the binaries (``<venv>/llama.cpp/python/llama_grammar.py``, from the sdist
whose sha256 it checked), and the client sends its grammar in the request's ``grammar`` field, so both engines
constrain answers alike.
"""
from __future__ import annotations

import functools
import importlib.util
import json
import os
import sys
from pathlib import Path

from ..config import LocalServerConfig
from ..errors import UserError

BINARY_ENV = "AURA_LLAMA_SERVER"
ENGINES = ("llama-server", "llama-cpp-python")


class EngineError(UserError):
    """No engine can serve the embedded model: one line, nothing started."""


def install_dir() -> Path:
    """Where the bootstrap installs the built binaries: inside the environment that runs the package."""
    return Path(sys.prefix) / "llama.cpp"


def server_binary() -> Path | None:
    """The llama-server binary to run (AURA_LLAMA_SERVER, else the bootstrap's build), None if there is none."""
    named = os.environ.get(BINARY_ENV)
    path = Path(named) if named else install_dir() / "bin" / "llama-server"
    return path if path.is_file() and os.access(path, os.X_OK) else None


def build_info() -> dict | None:
    """What the bootstrap recorded about its build (None: no build, or a binary named by AURA_LLAMA_SERVER)."""
    if os.environ.get(BINARY_ENV):
        return {"binary": os.environ[BINARY_ENV]}
    try:
        return json.loads((install_dir() / "BUILD.json").read_text())
    except (FileNotFoundError, ValueError):
        return None


def resolve(cfg: LocalServerConfig) -> str:
    """The engine this config runs on this machine (see the module docstring); a missing one: one line."""
    have_binary = server_binary() is not None
    have_python = importlib.util.find_spec("llama_cpp") is not None
    if cfg.engine == "llama-server" and not have_binary:
        raise EngineError(f"local.engine llama-server: no binary at {install_dir() / 'bin' / 'llama-server'} "
                          f"(bash scripts/bootstrap.sh builds it; or set {BINARY_ENV})")
    if cfg.engine == "llama-cpp-python" and not have_python:
        raise EngineError("local.engine llama-cpp-python: the package is not installed "
                          "(pip install -e '.[python-engine]')")
    if cfg.engine != "auto":
        return cfg.engine
    if have_binary:
        return "llama-server"
    if have_python:
        return "llama-cpp-python"
    raise EngineError("no embedded engine: neither llama.cpp's llama-server (built by bash scripts/bootstrap.sh into "
                      f"{install_dir() / 'bin'}) nor llama-cpp-python is installed")


@functools.cache
def _schema_converter():
    """llama-cpp-python's JSON-schema-to-GBNF converter: the file the bootstrap installed, else the package's."""
    path = install_dir() / "python" / "llama_grammar.py"
    if path.is_file():
        spec = importlib.util.spec_from_file_location("aura_llama_grammar", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module.json_schema_to_gbnf
    if importlib.util.find_spec("llama_cpp") is not None:
        from llama_cpp.llama_grammar import json_schema_to_gbnf

        return json_schema_to_gbnf
    raise EngineError(f"structured_output gbnf_schema: no JSON-schema-to-GBNF converter at {path} "
                      "(bash scripts/bootstrap.sh installs it with the engine)")


@functools.lru_cache(maxsize=256)
def _grammar_of(schema_json: str) -> str:
    return _schema_converter()(schema_json)


def schema_grammar(schema: dict) -> str:
    """The GBNF grammar of answers valid under `schema` (JSON with single spaces between tokens). An object's
    properties come in the schema's order (a rationale before its label), so the schema is not key-sorted."""
    return _grammar_of(json.dumps(schema))


def slots(cfg: LocalServerConfig, engine: str) -> int:
    """Requests the server answers at once: local.slots on llama-server; the Python server answers one."""
    return cfg.slots if engine == "llama-server" else 1


def binary_args(cfg: LocalServerConfig, model: Path, alias: str, port: int, token: str) -> list[str]:
    """llama-server's command line. Each of the `slots` gets a context of n_ctx tokens (the KV pool holds
    slots x n_ctx), so a prompt too long for n_ctx fails as it does on the Python server."""
    return [str(server_binary()), "--model", str(model), "--alias", alias, "--host", "127.0.0.1",
            "--port", str(port), "--threads", str(cfg.n_threads), "--threads-batch", str(cfg.n_threads),
            "--parallel", str(cfg.slots), "--kv-unified-per-slot", str(cfg.n_ctx),
            "--cache-ram", str(cfg.prompt_cache_mb), "--api-key", token, "--no-webui"]


def describe() -> str:
    """One line on the engine this environment has (the bootstrap prints it; provenance records `versions`)."""
    info = build_info()
    if server_binary() is not None:
        if info and "flavour" in info:
            return f"embedded engine: llama-server ({info['flavour']}, llama.cpp {info.get('llama_cpp_commit') or '?'})"
        return f"embedded engine: llama-server ({server_binary()})"
    if importlib.util.find_spec("llama_cpp") is not None:
        return "embedded engine: llama-cpp-python's server"
    return "no embedded engine installed"


def versions() -> dict[str, str | None]:
    """The llama-server build, for provenance (None when there is none)."""
    info = build_info()
    if server_binary() is None or not info:
        return {"llama-server": None}
    if "flavour" not in info:
        return {"llama-server": info.get("binary")}
    return {"llama-server": f"llama.cpp {info.get('llama_cpp_commit')} ({info['flavour']}; {info['sources']})"}
