#!/usr/bin/env bash
# The test command: installs what is needed, builds (with CUDA when a toolkit is present, so the
# CUDA backend must compile and link), builds the CPU tree again with clang (warnings are errors in
# both), checks that every file includes the standard headers it uses (include-what-you-use), runs
# every test, the fuzz target and the format check.
set -euo pipefail
cd "$(dirname "$0")/.."
bash ci/setup.sh
bash ci/build.sh
echo "== clang build (CPU, warnings as errors)"
bash ci/build-clang.sh
echo "== include-what-you-use (standard headers used but reached only through another)"
bash ci/iwyu.sh build-clang
echo "== tests"
ctest --test-dir build --output-on-failure -j "$(nproc)" --timeout 1200
echo "== G0 (static gate: committed receipts, results index, profile defaults, unit tests)"
g0="out/ci/$(date -u +%Y%m%d-%H%M%S)-g0"
./build/sparkglm-qualify run --gate G0 --ctest-dir build --id "$(basename "$g0")" --out "$g0"
echo "== fuzz (safetensors header parser)"
bash ci/fuzz.sh
echo "== format"
bash ci/format.sh --check
echo "== all green"
