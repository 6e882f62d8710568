"""Which program serves the embedded model, and how it is started.

Three engines speak the same OpenAI-compatible HTTP API on 127.0.0.1:

* ``xllamacpp`` (the default): llama.cpp's own server code in a prebuilt wheel from PyPI (``xllamacpp``, kept by
  the Xinference project; manylinux wheels for x86_64 with AVX2/FMA/F16C and for aarch64). It runs inside a Python
  process of ours (``aura.llm.xllamacpp_process``) and installs in seconds: no compiler, no build.
* ``llama-server``: the same server as a C++ binary that ``scripts/build_llama_server.sh`` compiles from the
  llama.cpp sources in llama-cpp-python's sdist into ``<venv>/llama.cpp/bin`` (with ``BUILD.json``: sources,
  sha256, flags) beside ``llama-bench``. Opt-in (``AURA_LLAMA_BUILD=source bash scripts/bootstrap.sh``), or
  chosen by the bootstrap where the wheel does not serve the CPU (x86_64 without AVX2, other architectures).
* ``llama-cpp-python``: the Python bindings' server app (``aura.llm.llama_server_process``), one request at a
  time. The bootstrap installs it only when neither of the above can be had.

Both llama.cpp servers serve ``slots`` requests at once with continuous batching, constrain answers to a grammar,
keep a RAM cache of earlier prompts' KV states, and report ``timings`` and
``usage.prompt_tokens_details.cached_tokens`` themselves.

``local.engine: auto`` (the default) takes a compiled binary when there is one (the bootstrap built it because it
was asked to or the wheel could not serve), else the wheel, else the Python server. The environment variable
``AURA_LLAMA_SERVER`` names another llama-server binary (e.g. a GPU build).

Answer schemas as grammars (``structured_output: gbnf_schema``, `schema_grammar`): a grammar of compact JSON, sent
in the request's ``grammar`` field. llama.cpp's own ``response_format`` schema grammar lets JSON spread over lines
with indentation, and a small model then writes pretty-printed JSON, newline and indentation tokens included (in
one default run, relevance answers of 240-300 tokens that listed one code per indented line, where the compact
grammar gets `{ "relevant": [] }`). So each engine gets the schema in a compact form it reads:

* xllamacpp's llama.cpp is built with llguidance, which reads a schema as ``%json`` in a Lark grammar; its
  ``x-guidance`` options fix the separators (``", "`` and ``": "``) and allow no other whitespace;
* the compiled binary and the Python server take GBNF from llama-cpp-python's converter
  (``llama_cpp/llama_grammar.py``, from the same checked sdist; the build installs that one pure-Python file beside
  the binaries), which allows single spaces only.

An object's properties come in the schema's order (a rationale before its label) in both.
"""
from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
import json
import os
import sys
from pathlib import Path

from ..config import LocalServerConfig
from ..errors import UserError

BINARY_ENV = "AURA_LLAMA_SERVER"
ENGINES = ("xllamacpp", "llama-server", "llama-cpp-python")
SERVER_ENGINES = ("xllamacpp", "llama-server")  # llama.cpp's own server: slots, batching, timings


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


def have_wheel() -> bool:
    return importlib.util.find_spec("xllamacpp") is not None


def resolve(cfg: LocalServerConfig) -> str:
    """The engine this config runs on this machine (see the module docstring); a missing one: one line."""
    have_binary = server_binary() is not None
    have_python = importlib.util.find_spec("llama_cpp") is not None
    if cfg.engine == "xllamacpp" and not have_wheel():
        raise EngineError("local.engine xllamacpp: the package is not installed "
                          "(bash scripts/bootstrap.sh installs it)")
    if cfg.engine == "llama-server" and not have_binary:
        raise EngineError(f"local.engine llama-server: no binary at {install_dir() / 'bin' / 'llama-server'} "
                          f"(AURA_LLAMA_BUILD=source bash scripts/bootstrap.sh builds it; or set {BINARY_ENV})")
    if cfg.engine == "llama-cpp-python" and not have_python:
        raise EngineError("local.engine llama-cpp-python: the package is not installed "
                          "(pip install -e '.[python-engine]')")
    if cfg.engine != "auto":
        return cfg.engine
    if have_binary:
        return "llama-server"
    if have_wheel():
        return "xllamacpp"
    if have_python:
        return "llama-cpp-python"
    raise EngineError("no embedded engine: none of xllamacpp, llama.cpp's llama-server (built into "
                      f"{install_dir() / 'bin'}) or llama-cpp-python is installed (bash scripts/bootstrap.sh)")


@functools.cache
def _schema_converter():
    """llama-cpp-python's JSON-schema-to-GBNF converter: the file the build installed (in this environment's build,
    or beside the build AURA_LLAMA_SERVER names: <build>/bin/llama-server, <build>/python/llama_grammar.py), else
    the package's."""
    path = install_dir() / "python" / "llama_grammar.py"
    named = server_binary()
    if not path.is_file() and named is not None and (named.parent.parent / "python" / path.name).is_file():
        path = named.parent.parent / "python" / path.name
    if path.is_file():
        spec = importlib.util.spec_from_file_location("aura_llama_grammar", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module.json_schema_to_gbnf
    if importlib.util.find_spec("llama_cpp") is not None:
        from llama_cpp.llama_grammar import json_schema_to_gbnf

        return json_schema_to_gbnf
    raise EngineError(f"structured_output gbnf_schema: no JSON-schema-to-GBNF converter at {path} "
                      "(AURA_LLAMA_BUILD=source bash scripts/bootstrap.sh installs it with the compiled engine)")


@functools.lru_cache(maxsize=256)
def _grammar_of(schema_json: str) -> str:
    return _schema_converter()(schema_json)


# llguidance's JSON options: the separators OpenAI's own JSON mode writes, and no other whitespace
COMPACT_JSON = {"whitespace_flexible": False, "item_separator": ", ", "key_separator": ": "}


def closed(schema):
    """`schema` with every object that lists its properties and says nothing of others closed
    (``additionalProperties: false``). llama-cpp-python's GBNF converter reads an absent ``additionalProperties`` so
    (the listed keys only); llguidance reads it as JSON Schema does (any other key allowed), and the embedded model
    then went on writing keys of its own until its token limit (an answer cut mid-string). Closing them gives both
    engines the same grammar."""
    if isinstance(schema, list):
        return [closed(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {}
    for key, value in schema.items():
        if key in ("properties", "$defs", "definitions") and isinstance(value, dict):
            out[key] = {name: closed(sub) for name, sub in value.items()}
        elif key in ("items", "anyOf", "oneOf", "allOf", "additionalProperties", "prefixItems"):
            out[key] = closed(value)
        else:
            out[key] = value
    if "properties" in out and "additionalProperties" not in out:
        out["additionalProperties"] = False
    return out


def schema_grammar(schema: dict, engine: str) -> str:
    """The grammar of compact JSON answers valid under `schema`, in the form `engine` reads (module docstring). The
    schema is not key-sorted: an object's properties come in its order."""
    if engine == "xllamacpp":
        return "%llguidance {}\nstart: %json " + json.dumps({"x-guidance": COMPACT_JSON, **closed(schema)})
    return _grammar_of(json.dumps(schema))


def slots(cfg: LocalServerConfig, engine: str) -> int:
    """Requests the server answers at once: local.slots on llama.cpp's server; the Python server answers one."""
    return cfg.slots if engine in SERVER_ENGINES else 1


def binary_args(cfg: LocalServerConfig, model: Path, alias: str, port: int, token: str) -> list[str]:
    """llama-server's command line. Each of the `slots` gets a context of n_ctx tokens (the KV pool holds
    slots x n_ctx), so a prompt too long for n_ctx fails as it does on the Python server."""
    return [str(server_binary()), "--model", str(model), "--alias", alias, "--host", "127.0.0.1",
            "--port", str(port), "--threads", str(cfg.n_threads), "--threads-batch", str(cfg.n_threads),
            "--parallel", str(cfg.slots), "--kv-unified-per-slot", str(cfg.n_ctx),
            "--cache-ram", str(cfg.prompt_cache_mb), "--api-key", token, "--no-webui"]


def wheel_args(cfg: LocalServerConfig, model: Path, alias: str, port: int, token: str) -> list[str]:
    """`xllamacpp_process`'s arguments: the same server settings as `binary_args`."""
    return ["--model", str(model), "--alias", alias, "--port", str(port), "--api-key", token,
            "--threads", str(cfg.n_threads), "--slots", str(cfg.slots), "--n-ctx", str(cfg.n_ctx),
            "--cache-ram", str(cfg.prompt_cache_mb)]


def wheel_version() -> str | None:
    try:
        return importlib.metadata.version("xllamacpp")
    except importlib.metadata.PackageNotFoundError:
        return None


def describe() -> str:
    """One line on the engine this environment runs by default (the bootstrap prints it; provenance: `versions`)."""
    info = build_info()
    if server_binary() is not None:
        if info and "flavour" in info:
            return f"embedded engine: llama-server ({info['flavour']}, llama.cpp {info.get('llama_cpp_commit') or '?'})"
        return f"embedded engine: llama-server ({server_binary()})"
    if have_wheel():
        return f"embedded engine: xllamacpp {wheel_version()} (llama.cpp's server, prebuilt wheel)"
    if importlib.util.find_spec("llama_cpp") is not None:
        return "embedded engine: llama-cpp-python's server"
    return "no embedded engine installed"


def versions() -> dict[str, str | None]:
    """The embedded engines this environment has, for provenance (None where there is none): the xllamacpp wheel's
    version and the compiled llama-server's build."""
    info = build_info()
    out: dict[str, str | None] = {"xllamacpp": wheel_version()}
    if server_binary() is None or not info:
        out["llama-server"] = None
    elif "flavour" not in info:
        out["llama-server"] = info.get("binary")
    else:
        out["llama-server"] = f"llama.cpp {info.get('llama_cpp_commit')} ({info['flavour']}; {info['sources']})"
    return out
