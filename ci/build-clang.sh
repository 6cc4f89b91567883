#!/usr/bin/env bash
# Builds the CPU tree with clang++ into build-clang/ with warnings as errors, so that code g++ accepts
# and clang warns about (or the reverse) cannot land. Compile and link only: the tests run in build/.
# Arguments are passed to cmake (e.g. -DSPARKGLM_TESTS=OFF).
set -euo pipefail
cd "$(dirname "$0")/.."
launcher=()
if command -v ccache >/dev/null 2>&1; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
CC=clang CXX=clang++ cmake -S . -B build-clang -G Ninja -DCMAKE_BUILD_TYPE=Release -DSPARKGLM_CUDA=OFF \
  -DSPARKGLM_WERROR=ON "${launcher[@]}" "$@"
cmake --build build-clang -j "$(nproc)"
