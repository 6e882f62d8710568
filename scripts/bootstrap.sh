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

# llama-cpp-python compiles llama.cpp. A native (-march=native) build segfaulted on this
# workplace's AVX-512/AMX CPUs, so build a portable AVX2 flavour on x86_64.
if [ "$(uname -m)" = "x86_64" ] && [ -z "${CMAKE_ARGS:-}" ]; then
  export CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON"
fi

.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e .
echo "bootstrap: $(.venv/bin/python --version), aura-eval installed in .venv" >&2
