#!/usr/bin/env bash
# Builds the libFuzzer targets with clang and fuzzes the safetensors header parser for 30 seconds,
# starting from the checked-in seeds. Fails on any crash, sanitizer report or leak.
set -euo pipefail
cd "$(dirname "$0")/.."

CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DSPARKGLM_FUZZ=ON -DSPARKGLM_TESTS=OFF \
  -DSPARKGLM_BENCH=OFF -DSPARKGLM_CUDA=OFF -DSPARKGLM_WERROR=ON
ninja -C build-fuzz safetensors_header_fuzz

# libFuzzer writes the inputs it discovers into the first corpus directory; a scratch one keeps the
# checked-in seeds (the second, read-only here) unchanged. Crash reproducers land in build-fuzz/.
work=build-fuzz/corpus/safetensors
mkdir -p "$work"
./build-fuzz/fuzz/safetensors_header_fuzz -max_total_time=30 -dict=fuzz/safetensors.dict \
  -artifact_prefix=build-fuzz/ "$work" fuzz/corpus/safetensors
ninja -C build-fuzz request_parser_fuzz && mkdir -p build-fuzz/corpus/request_parser && ./build-fuzz/fuzz/request_parser_fuzz -max_total_time=20 -max_len=4096 -artifact_prefix=build-fuzz/ build-fuzz/corpus/request_parser
