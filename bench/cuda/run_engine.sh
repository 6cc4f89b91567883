#!/usr/bin/env bash
# The engine measurements of issue 6 on a GPU machine, in parts that each fit one device call:
#   tests  the CUDA tests, then device time by model part (--profile-steps, decode graphs
#          included) for tinyglm decode C1/C8 and an 8K prefill;
#   bench  sparkglm-runner-bench on tinyglm (decode C1/C4/C8 pipelined and synchronous, cold
#          prefill 8K/32K/64K) and on glm-5.3-flash at $FLASH_LAYERS layers (its decode cells also
#          at temperature 0.7, host-drawn vs drawn by the runner), the PyTorch peer
#          (eager, then torch.compile) on the same GPU, and the measurement bundle over all three;
#   g2     the G2 gate on tinyglm served by the CUDA backend at full scale, 3 repetitions, with the
#          G1 operator table $OPERATORS (bench/cuda/run_g1.sh) judged inside the same bundle.
# Binaries come from $BUILD (built elsewhere with CUDA for sm_90a); results land in $OUT, bundles
# as tarballs named by their id (a bundle's folder is its id).
#   OUT=out BUILD=build bench/cuda/run_engine.sh tests
#   OUT=out BUILD=build MEASURE_ID=2026-11-30-engine-h200 bench/cuda/run_engine.sh bench
#   OUT=out BUILD=build OPERATORS=g1/operators.json G2_ID=2026-11-30-g2-h200 bench/cuda/run_engine.sh g2
set -uo pipefail
part=${1:?usage: run_engine.sh tests|bench|g2}
OUT=${OUT:-engine-out}
BUILD=${BUILD:-build}
FLASH_LAYERS=${FLASH_LAYERS:-8}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.mem --format=csv
RUNNER_BENCH=("$BUILD/bench/sparkglm-runner-bench" --device cuda)
case "$part" in
tests)
  timeout 300 "$BUILD/tests/sparkglm_cuda_tests" > "$OUT/cuda-tests.txt" 2>&1
  rc=$?
  echo "cuda tests rc=$rc"; grep -E "FAILED|PASSED" "$OUT/cuda-tests.txt" | head
  for cell in decode_c1 decode_c8 prefill_8k; do
    echo "== tinyglm $cell"
    timeout 120 "$BUILD/bench/sparkglm-runner-bench" --device cuda --profile-steps \
      --preset tinyglm --runs 1 --decode-steps 32 --cells "$cell" --out /tmp/profile.json 2>&1 |
      grep -E "device time|ms/step"
  done > "$OUT/profile.txt"
  cat "$OUT/profile.txt"
  exit $rc
  ;;
bench)
  timeout 300 "${RUNNER_BENCH[@]}" --preset tinyglm --runs 3 --decode-steps 64 --max-seconds 120 \
    --out "$OUT/runner-tinyglm.json" 2> "$OUT/runner-tinyglm.log"
  echo "tinyglm bench rc=$?"; tail -8 "$OUT/runner-tinyglm.log" | cut -c1-240
  # Decode cells also sample at temperature 0.7 (top-p 0.95): host draws vs the runner's draws.
  timeout 300 "${RUNNER_BENCH[@]}" --preset glm-5.3-flash --num-layers "$FLASH_LAYERS" --runs 3 --decode-steps 32 \
    --max-seconds 90 --temperature 0.7 --cells decode_c1,decode_c4,decode_c8,prefill_8k,prefill_32k,prefill_64k \
    --out "$OUT/runner-glm-5.3-flash.json" 2> "$OUT/runner-glm.log"
  echo "flash bench rc=$?"; tail -8 "$OUT/runner-glm.log" | cut -c1-240
  timeout 420 python3 bench/torch/tinyglm_torch.py --preset tinyglm --device cuda \
    --modes eager,compile --max-seconds 90 --out "$OUT/torch-tinyglm.json" > "$OUT/torch.log" 2>&1
  echo "torch peer rc=$?"; tail -15 "$OUT/torch.log" | cut -c1-200
  m=/tmp/${MEASURE_ID:-engine-h200}
  limitations=()
  while IFS= read -r line; do [ -n "$line" ] && limitations+=(--limitation "$line"); done \
    < "${LIMITATIONS:-bench/cuda/engine_limitations.txt}"
  "$BUILD/sparkglm-qualify" measure --runner-bench "$OUT/runner-tinyglm.json" \
    --runner-bench "$OUT/runner-glm-5.3-flash.json" --torch-peer "$OUT/torch-tinyglm.json" \
    --title "${MEASURE_TITLE:-engine on the GPU}" --id "$(basename "$m")" --out "$m" \
    "${limitations[@]}" > "$OUT/measure.log" 2>&1
  echo "measure rc=$?"; tail -40 "$OUT/measure.log" | cut -c1-200
  tar -C /tmp -czf "$OUT/measure-bundle.tar.gz" "$(basename "$m")"
  ;;
g2)
  g2=/tmp/${G2_ID:-g2-tinyglm-cuda-h200}
  operators=()
  [ -n "${OPERATORS:-}" ] && operators=(--operators "$OPERATORS")
  timeout 500 "$BUILD/sparkglm-qualify" run --gate G2 --preset tinyglm --device cuda --scale 1 \
    --repetitions 3 "${operators[@]}" --id "$(basename "$g2")" --out "$g2" > "$OUT/g2.log" 2>&1
  echo "G2 rc=$?"; tail -30 "$OUT/g2.log" | cut -c1-200
  tar -C /tmp -czf "$OUT/g2-bundle.tar.gz" "$(basename "$g2")"
  ;;
*)
  echo "usage: run_engine.sh tests|bench|g2" >&2
  exit 2
  ;;
esac
