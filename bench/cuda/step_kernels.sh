#!/usr/bin/env bash
# Every kernel of one engine step, timed by Nsight Compute, then tabulated by step_kernels.py:
# the runner bench runs eagerly (inside CUDA graphs the kernels are not launches ncu can name),
# with a small KV pool (ncu saves and restores device memory around each replay).
#   BUILD=build bench/cuda/step_kernels.sh OUT_DIR --preset glm-5.3-flash --num-layers 4 \
#       --weight-format fp4-local --cells decode_c1
# Kernels named by STEP_KERNELS (a regex; default: the decode step's) are profiled, which leaves
# out the dummy-weight makers and the prefill's dequantization.
set -uo pipefail
out=${1:?usage: step_kernels.sh OUT_DIR RUNNER_BENCH_ARGS...}
shift
BUILD=${BUILD:-build}
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
[ -n "$NCU" ] || { echo "step_kernels.sh: ncu not found" >&2; exit 2; }
K=${STEP_KERNELS:-'^(absorb_decode|advance_hist|combine|embed|gather|gemv|greedy|group|hc_|layer_norm|output_gate|pool_completed|prepare|quantized_gemv|recurrent|rms_norm|router|shared_swiglu|split|store_|sum_splits|swiglu|take|gate_up|down|small|tiled|select|score|sample|linear_f32)'}
mkdir -p "$out"
"$NCU" --clock-control none --kernel-name "regex:$K" \
  --metrics gpu__time_duration.sum,dram__bytes_read.sum,launch__registers_per_thread \
  --csv --log-file "$out/ncu.csv" \
  "$BUILD/bench/sparkglm-runner-bench" --device cuda --enforce-eager --runs 1 --decode-steps 3 \
  --warmup-steps 1 --gpu-memory-utilization 0.2 --out "$out/runner-bench.json" "$@" \
  > "$out/runner-bench.log" 2>&1 || { echo "step_kernels.sh: ncu failed (see $out)" >&2; exit 1; }
python3 "$(dirname "$0")/step_kernels.py" "$out/ncu.csv" | tee "$out/step-kernels.txt"
