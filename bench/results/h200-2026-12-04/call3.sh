# Session 16 call 3: carried binaries (Debian, g++ 12, CUDA 13.0, this tree): quantized_gemv with
# guard-free full stages, 32-bit k arithmetic and packed MXFP8 stage scales. Tests, G1 of the
# quantized rows (streamed vs baseline vs unsplit), glm-5.3-flash fp4-local 28 layers decode,
# then speculation on the trained tinyglm-micro on CUDA (C1/C4/C8, and JSON mode).
set -x
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
R=/tmp/R3; mkdir -p $R build /tmp/devroot
fin() { tar czf $OUT/r3.tgz -C /tmp R3; }
trap fin EXIT
for f in .devrun/*.deb; do dpkg -x $f /tmp/devroot; done
mkdir -p /tmp/devroot/rt && cp -a /tmp/devroot/usr/lib/x86_64-linux-gnu/*.so* /tmp/devroot/rt/ 2>/dev/null
export LD_LIBRARY_PATH=/tmp/devroot/rt SPARKGLM_SOURCE_DIR="$(pwd)"
tar xzf .devrun/bins.tgz -C build
T0=$(date +%s); el() { echo "$1 rc=$2 after $(( $(date +%s) - T0 ))s" | tee -a $R/summary.txt; }
timeout 150 ./build/tests/sparkglm_cuda_tests --gtest_filter='CudaQuantizedGemv.*:CudaModelRunner.*:CudaMoeQuant.*:ServedModels/*:DeviceWeightsFp4.*:SparkMoe.*:CudaOperators.*' --gtest_output=json:$R/tests.json > $R/tests.log 2>&1; el tests $?
grep -E "^\[  (PASSED|FAILED|SKIPPED)|FAILED  \]" $R/tests.log | head -20
timeout 120 ./build/bench/cuda/g1_operators --only quantized --runs 30 --out $R/g1-lean.json > $R/g1.log 2>&1; el g1 $?
./build/sparkglm-qualify run --gate G1 --operators $R/g1-lean.json --id 2026-12-04-g1-quant-lean-h200 --out $R/2026-12-04-g1-quant-lean-h200 --title "quantized_gemv with guard-free full stages, 32-bit k arithmetic and packed MXFP8 stage scales, against the 2026-12-02 load path and without the split over blocks, on the H200 (issue 15)" > $R/g1-gate.log 2>&1; el g1gate $?
timeout 100 ./build/bench/sparkglm-runner-bench --device cuda --preset glm-5.3-flash --num-layers 28 --weight-format fp4-local --cells decode_c1,decode_c4,decode_c8 --runs 2 --max-seconds 80 --out $R/rb-lean-glm28-fp4.json > $R/rb-glm28.log 2>&1; el glm28 $?
timeout 40 ./build/bench/sparkglm-runner-bench --device cuda --preset tinyglm --weight-format bf16 --cells decode_c1,decode_c4 --runs 2 --gpu-memory-utilization 0.5 --out $R/rb-lean-tinyglm-bf16.json > $R/rb-tiny.log 2>&1; el tiny $?
M=tinyglm/weights/tinyglm-micro-trained
timeout 120 ./build/bench/speculation_bench --device cuda --model $M --prompts $M/heldout.json --k 0,1,2,3 --concurrency 1,4,8 --max-tokens 128 --reps 3 > $R/spec-micro-cuda-c148.json 2> $R/spec-c148.log; el spec $?
for mode in "" --json-mode; do
  timeout 60 ./build/bench/speculation_bench --device cuda --model $M --prompts $M/heldout.json --tasks json $mode --k 0,1,2,3 --concurrency 1,4,8 --max-tokens 128 --reps 3 > $R/spec-json$mode-cuda.json 2> $R/spec-json$mode.log; el "spec-json$mode" $?
done
