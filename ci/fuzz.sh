#!/usr/bin/env bash
# Builds the libFuzzer targets with clang and runs each for a fixed time from its checked-in seeds
# (about 2.5 minutes in all): the safetensors header parser, the OpenAI request parser (the body
# and the JSON inside its strings) and every JSON file reader (config.json, tokenizer.json, recipe,
# qualification.json, profile, workload, gate). The seeds include documents nested 20,000 deep.
# Fails on any crash, sanitizer report or leak.
set -euo pipefail
cd "$(dirname "$0")/.."

# The libraries that json_inputs_fuzz links are instrumented too, so that coverage guides the
# fuzzer into the readers and the sanitizers check them.
instrument="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all"
CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DSPARKGLM_FUZZ=ON -DSPARKGLM_TESTS=OFF \
  -DSPARKGLM_BENCH=OFF -DSPARKGLM_CUDA=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSPARKGLM_WERROR=ON \
  -DCMAKE_CXX_FLAGS="$instrument"
ninja -C build-fuzz safetensors_header_fuzz request_parser_fuzz json_inputs_fuzz

# fuzz BINARY CORPUS SECONDS [libFuzzer flags...]: libFuzzer writes the inputs it discovers into the first
# corpus directory; a scratch one keeps the checked-in seeds (the second, read-only here)
# unchanged. Crash reproducers land in build-fuzz/.
fuzz() {
  local binary=$1 corpus=$2 seconds=$3
  shift 3
  local work=build-fuzz/corpus/$corpus
  mkdir -p "$work"
  echo "== $binary: ${seconds}s"
  "./build-fuzz/fuzz/$binary" -max_total_time="$seconds" -artifact_prefix=build-fuzz/ \
    "$@" "$work" "fuzz/corpus/$corpus"
}

fuzz safetensors_header_fuzz safetensors 30 -dict=fuzz/safetensors.dict
fuzz request_parser_fuzz request_parser 45 -max_len=65536
fuzz json_inputs_fuzz json_inputs 75 -max_len=131072
