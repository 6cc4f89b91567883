#!/usr/bin/env bash
# The engine measurements of issue 6 on a GPU machine, in two parts (each fits one device call).
#   part a: the CUDA tests, then sparkglm-runner-bench on tinyglm (decode C1/C4/C8, cold prefill
#           8K/32K/64K) and the PyTorch peer (eager, then torch.compile) on the same GPU;
#   part b: sparkglm-runner-bench on glm-5.3-flash at the depth that fits ($FLASH_LAYERS), the G2
#           gate on tinyglm served by the CUDA backend at full scale, and the measurement bundle
#           over part a's files (copied into $RESULTS first) and part b's.
# Binaries come from $BUILD (built elsewhere with CUDA for sm_90a); results land in $OUT.
#   OUT=out BUILD=build bench/cuda/run_engine.sh a
#   OUT=out BUILD=build RESULTS=bench/results/engine bench/cuda/run_engine.sh b
set -uo pipefail
part=${1:?usage: run_engine.sh a|b}
OUT=${OUT:-engine-out}
BUILD=${BUILD:-build}
RESULTS=${RESULTS:-bench/results/engine}
FLASH_LAYERS=${FLASH_LAYERS:-8}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.mem --format=csv
if [ "$part" = a ]; then
  timeout 240 "$BUILD/tests/sparkglm_cuda_tests" > "$OUT/cuda-tests.txt" 2>&1
  echo "cuda tests rc=$?"; grep -E "FAILED|PASSED" "$OUT/cuda-tests.txt" | head
  timeout 300 "$BUILD/bench/sparkglm-runner-bench" --device cuda --preset tinyglm --runs 3 \
    --decode-steps 64 --max-seconds 120 --out "$OUT/runner-tinyglm.json" 2> "$OUT/runner-tinyglm.log"
  echo "runner bench rc=$?"; tail -8 "$OUT/runner-tinyglm.log" | cut -c1-240
  timeout 420 python3 bench/torch/tinyglm_torch.py --preset tinyglm --device cuda \
    --modes eager,compile --max-seconds 90 --out "$OUT/torch-tinyglm.json" > "$OUT/torch.log" 2>&1
  echo "torch peer rc=$?"; tail -15 "$OUT/torch.log" | cut -c1-200
else
  flash="$OUT/runner-glm-5.3-flash.json"
  if [ -f "$RESULTS/runner-glm-5.3-flash.json" ] && [ -n "${REUSE_FLASH:-}" ]; then
    flash="$RESULTS/runner-glm-5.3-flash.json"  # measured by an earlier call of this part
  else
  timeout 300 "$BUILD/bench/sparkglm-runner-bench" --device cuda --preset glm-5.3-flash \
    --num-layers "$FLASH_LAYERS" --runs 3 --decode-steps 32 --max-seconds 90 \
    --cells decode_c1,decode_c4,decode_c8,prefill_8k,prefill_32k \
    --out "$OUT/runner-glm-5.3-flash.json" 2> "$OUT/runner-glm.log"
  echo "flash bench rc=$?"; tail -8 "$OUT/runner-glm.log" | cut -c1-240
  fi
  g2=/tmp/${G2_ID:-g2-tinyglm-cuda-h200}  # a bundle's folder is named by its id
  timeout 400 "$BUILD/sparkglm-qualify" run --gate G2 --preset tinyglm --device cuda --scale 1 \
    --repetitions 3 --id "$(basename "$g2")" --out "$g2" > "$OUT/g2.log" 2>&1
  echo "G2 rc=$?"; tail -30 "$OUT/g2.log" | cut -c1-200
  m=/tmp/${MEASURE_ID:-engine-h200}
  "$BUILD/sparkglm-qualify" measure --runner-bench "$RESULTS/runner-tinyglm.json" \
    --runner-bench "$flash" --torch-peer "$RESULTS/torch-tinyglm.json" \
    --title "${MEASURE_TITLE:-engine on the GPU}" --id "$(basename "$m")" --out "$m" \
    > "$OUT/measure.log" 2>&1
  echo "measure rc=$?"; tail -30 "$OUT/measure.log" | cut -c1-200
  tar -C /tmp -czf "$OUT/bundles.tar.gz" "$(basename "$g2")" "$(basename "$m")"
fi
