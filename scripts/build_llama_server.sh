#!/usr/bin/env bash
# Build llama.cpp's own server (llama-server) and its benchmark (llama-bench) for the embedded model, from the
# llama.cpp sources that llama-cpp-python's sdist on PyPI carries (vendor/llama.cpp): the package registry is the
# only source needed. Installs them into <venv>/llama.cpp/bin with BUILD.json (sources, sha256, flags, time), and
# the same sdist's JSON-schema-to-GBNF converter (llama_cpp/llama_grammar.py) into <venv>/llama.cpp/python.
# Idempotent: an install of the same sources is kept. Exit status non-zero (and the reason on stderr, the
# compiler's output in <venv>/llama.cpp-build.log) when the build cannot be had; scripts/bootstrap.sh then
# falls back to llama-cpp-python's server.
#
# CPU features: on x86_64 with AVX2 a portable AVX2/FMA/F16C build (it runs on every AVX2 machine, AVX-512 ones
# included; a -march=native build died with SIGILL on this project's AVX-512/AMX machines); without AVX2 a build
# with no SIMD assumptions. AURA_LLAMA_CPU_VARIANTS=all builds every x86 CPU variant as a loadable backend and
# picks the best at run time (14 variants: many times the compile time).
set -euo pipefail
cd "$(dirname "$0")/.."

VERSION=0.3.36
SHA256=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
VENV=.venv
DEST="$VENV/llama.cpp"
LOG="$VENV/llama.cpp-build.log"

CONVERTER=python/llama_grammar.py  # the sdist's JSON-schema-to-GBNF converter (pure Python; aura.llm.llama_engine)
built() { [ -x "$DEST/bin/llama-server" ] && grep -q "\"sdist_sha256\": \"$SHA256\"" "$DEST/BUILD.json" 2>/dev/null; }
if built && [ -f "$DEST/$CONVERTER" ]; then
  exit 0
fi
fail() { echo "build_llama_server: $*" >&2; exit 1; }
install_converter() {  # into $1, from the checked sdist's llama_cpp/llama_grammar.py
  mkdir -p "$1/python"
  cp "$WORK/llama_cpp_python-$VERSION/llama_cpp/llama_grammar.py" "$1/$CONVERTER"
}
command -v c++ >/dev/null 2>&1 || fail "no C++ compiler (c++) on PATH"
CMAKE=$(command -v cmake || true)
if [ -z "$CMAKE" ]; then  # the registry's cmake wheel
  "$VENV/bin/python" -m pip install --quiet cmake >>"$LOG" 2>&1 || fail "cmake is missing and could not be installed"
  CMAKE="$VENV/bin/cmake"
fi

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
started=$(date +%s)
: >"$LOG"
"$VENV/bin/python" -m pip download --quiet --no-deps --no-binary :all: -d "$WORK" "llama-cpp-python==$VERSION" \
  >>"$LOG" 2>&1 || fail "could not download llama-cpp-python $VERSION's sdist (log: $LOG)"
SDIST="$WORK/llama_cpp_python-$VERSION.tar.gz"
echo "$SHA256  $SDIST" | sha256sum -c --quiet - >>"$LOG" 2>&1 || fail "$SDIST: sha256 is not $SHA256"
tar -xzf "$SDIST" -C "$WORK"
SRC="$WORK/llama_cpp_python-$VERSION/vendor/llama.cpp"
if built; then  # a build from before the converter was installed: add it, keep the binaries
  install_converter "$DEST"
  echo "build_llama_server: added $DEST/$CONVERTER" >&2
  exit 0
fi

FLAGS=(-DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF
       -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_TOOLS=ON)
if [ "${AURA_LLAMA_CPU_VARIANTS:-}" = "all" ]; then
  FLAVOUR="all CPU variants, chosen at run time"
  FLAGS+=(-DBUILD_SHARED_LIBS=ON -DGGML_BACKEND_DL=ON -DGGML_CPU_ALL_VARIANTS=ON)
elif [ "$(uname -m)" = "x86_64" ] && grep -qw avx2 /proc/cpuinfo 2>/dev/null; then
  FLAVOUR="AVX2"
  FLAGS+=(-DBUILD_SHARED_LIBS=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON)
else
  FLAVOUR="portable (no SIMD assumptions)"
  FLAGS+=(-DBUILD_SHARED_LIBS=OFF -DGGML_AVX=OFF -DGGML_AVX2=OFF -DGGML_FMA=OFF -DGGML_F16C=OFF)
fi
JOBS=$(nproc 2>/dev/null || echo 2)
echo "build_llama_server: compiling llama.cpp's server ($FLAVOUR, $JOBS jobs; minutes on a small machine)" >&2
"$CMAKE" -S "$SRC" -B "$WORK/build" "${FLAGS[@]}" >>"$LOG" 2>&1 || fail "cmake configure failed (log: $LOG)"
"$CMAKE" --build "$WORK/build" --target llama-server llama-bench -j "$JOBS" >>"$LOG" 2>&1 \
  || fail "compile failed (log: $LOG)"
"$WORK/build/bin/llama-server" --version >>"$LOG" 2>&1 || fail "the built llama-server does not run (log: $LOG)"

rm -rf "$DEST.new"
mkdir -p "$DEST.new/bin"
cp "$WORK/build/bin/llama-server" "$WORK/build/bin/llama-bench" "$DEST.new/bin/"
cp "$WORK/build/bin/"*.so* "$DEST.new/bin/" 2>/dev/null || true  # shared builds: the backends beside the binary
install_converter "$DEST.new"
commit=$("$WORK/build/bin/llama-server" --version 2>&1 | sed -n 's/.*commit \([0-9a-f]*\).*/\1/p' | head -1)
cat >"$DEST.new/BUILD.json" <<EOF
{"sources": "llama-cpp-python $VERSION sdist (PyPI), vendor/llama.cpp", "sdist_sha256": "$SHA256",
 "llama_cpp_commit": "$commit", "flavour": "$FLAVOUR", "cmake_flags": "${FLAGS[*]}",
 "build_seconds": $(( $(date +%s) - started )), "built": "$(date -u +%Y-%m-%dT%H:%M:%SZ)"}
EOF
rm -rf "$DEST"
mv "$DEST.new" "$DEST"
echo "build_llama_server: llama-server ($FLAVOUR, llama.cpp $commit) in $DEST/bin after $(( $(date +%s) - started )) s" >&2
