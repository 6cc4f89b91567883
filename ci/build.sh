#!/usr/bin/env bash
# Configures and builds into build/ (Release). The CUDA backend is built when nvcc is found. Warnings
# are errors here (SPARKGLM_WERROR), as in CI; a plain `cmake` build leaves them warnings, and
# `bash ci/build.sh -DSPARKGLM_WERROR=OFF` does too. ccache is used when installed.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH=/usr/local/cuda/bin:$PATH
fi
launcher=()
if command -v ccache >/dev/null 2>&1; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
fi
jobs=$(nproc)
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DSPARKGLM_WERROR=ON "${launcher[@]}" "$@"
cmake --build build -j "$jobs"
