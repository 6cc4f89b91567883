# Session 16 call 4: carried binaries of the final quantized_gemv (baseline path with 64-bit k
# loop variables again: fewer registers at 3-4 x tiles). Every CUDA test of the touched kernels
# and the served models, G1 of the quantized rows, glm-5.3-flash fp4-local 28 layers and tinyglm
# decode, and speculation under JSON mode on CUDA (the pool now sized by the device).
set -x
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
R=/tmp/R4; mkdir -p $R build /tmp/devroot
fin() { tar czf $OUT/r4.tgz -C /tmp R4; }
trap fin EXIT
for f in .devrun/*.deb; do dpkg -x $f /tmp/devroot; done
mkdir -p /tmp/devroot/rt && cp -a /tmp/devroot/usr/lib/x86_64-linux-gnu/*.so* /tmp/devroot/rt/ 2>/dev/null
export LD_LIBRARY_PATH=/tmp/devroot/rt SPARKGLM_SOURCE_DIR="$(pwd)"
tar xzf .devrun/bins.tgz -C build
T0=$(date +%s); el() { echo "$1 rc=$2 after $(( $(date +%s) - T0 ))s" | tee -a $R/summary.txt; }
timeout 200 ./build/tests/sparkglm_cuda_tests --gtest_filter='CudaQuantizedGemv.*:CudaModelRunner.*:CudaMoeQuant.*:ServedModels/*:DeviceWeightsFp4.*:SparkMoe.*:CudaOperators.*:Batch/*:Rollback/*:CudaStepPipeline.*' --gtest_output=json:$R/tests.json > $R/tests.log 2>&1; el tests $?
grep -E "^\[  (PASSED|FAILED|SKIPPED)|FAILED  \]" $R/tests.log | head -20
timeout 100 ./build/bench/cuda/g1_operators --only quantized,moe_quant --runs 30 --out $R/g1-final.json > $R/g1.log 2>&1; el g1 $?
./build/sparkglm-qualify run --gate G1 --operators $R/g1-final.json --id 2026-12-04-g1-quant-lean-h200 --out $R/2026-12-04-g1-quant-lean-h200 --title "quantized_gemv streamed through shared memory with guard-free stages, 32-bit k arithmetic and packed MXFP8 stage scales, against the 2026-12-02 load path and without the split over blocks, in one run on the H200 (issue 15)" > $R/g1-gate.log 2>&1; el g1gate $?
timeout 80 ./build/bench/sparkglm-runner-bench --device cuda --preset glm-5.3-flash --num-layers 28 --weight-format fp4-local --cells decode_c1,decode_c4,decode_c8 --runs 2 --max-seconds 60 --out $R/rb-final-glm28-fp4.json > $R/rb-glm28.log 2>&1; el glm28 $?
timeout 40 ./build/bench/sparkglm-runner-bench --device cuda --preset tinyglm --weight-format fp4-local --cells decode_c1,decode_c4,decode_c8 --runs 2 --gpu-memory-utilization 0.5 --out $R/rb-final-tinyglm-fp4.json > $R/rb-tiny.log 2>&1; el tiny $?
M=tinyglm/weights/tinyglm-micro-trained
for mode in "" --json-mode; do
  timeout 60 ./build/bench/speculation_bench --device cuda --model $M --prompts $M/heldout.json --tasks json $mode --k 0,1,2,3 --concurrency 1,4,8 --max-tokens 128 --reps 3 > $R/spec-json$mode-cuda.json 2> $R/spec-json$mode.log; el "spec-json$mode" $?
done
