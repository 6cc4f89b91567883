# Session 17 call 5: carried binaries (Debian, g++ 12, CUDA 13.0) of the committed kernel. Call 4
# showed the tile's last block adding the split partial sums slower than the second launch
# (quantized kda_f_a at 8 rows 11.7 against 9.6 us; glm-5.3-flash fp4-local C1 7.77 against 7.70
# ms), so that fusion is gone again: the split sums are the second kernel's, quantized_gemv is
# HEAD's. The tests of the touched paths, G1 of the BF16 linear rows (peers stream and
# registers: each of the two kernels alone), tinyglm BF16 decode before (HEAD b1a1fb8) and after.
set -x
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
R=/tmp/R5; mkdir -p $R build /tmp/devroot
fin() { tar czf $OUT/r5.tgz -C /tmp R5; }
trap fin EXIT
for f in .devrun/*.deb; do dpkg -x $f /tmp/devroot; done
mkdir -p /tmp/devroot/rt && cp -a /tmp/devroot/usr/lib/x86_64-linux-gnu/*.so* /tmp/devroot/rt/ 2>/dev/null
export LD_LIBRARY_PATH=/tmp/devroot/rt SPARKGLM_SOURCE_DIR="$(pwd)"
tar xzf .devrun/bins.tgz -C build
T0=$(date +%s); el() { echo "$1 rc=$2 after $(( $(date +%s) - T0 ))s" | tee -a $R/summary.txt; }
timeout 240 ./build/tests/sparkglm_cuda_tests --gtest_filter='CudaOperators.*:CudaModelRunner.*:ServedModels/*:Batch/*:Rollback/*:CudaStepPipeline.*:CudaMoe*:SparkMoe.*:CudaSpec*:CudaGraph*' --gtest_output=json:$R/tests.json > $R/tests.log 2>&1; el tests $?
grep -E "^\[  (PASSED|FAILED|SKIPPED)|FAILED  \]" $R/tests.log | head -20
timeout 150 ./build/bench/cuda/g1_operators --only linear --runs 30 --out $R/g1-linear.json > $R/g1.log 2>&1; el g1 $?
./build/sparkglm-qualify run --gate G1 --operators $R/g1-linear.json --id 2026-12-04-g1-gemv-bf16-stream-h200 --out $R/2026-12-04-g1-gemv-bf16-stream-h200 --title "gemv_bf16: weights of 32 MiB or more streamed through shared memory by resident blocks, smaller ones by the 2026-12-02 register kernel (the same bits), each kernel alone beside it in the same run, on the H200 (issue 15)" > $R/g1-gate.log 2>&1; el g1gate $?
rb() { # name binary args...
  local n=$1 b=$2; shift 2
  timeout 120 $b --device cuda "$@" --out $R/rb-$n.json > $R/rb-$n.log 2>&1; el rb-$n $?
}
for i in 1 2; do
  rb tinyglm-bf16-before-$i ./build/sparkglm-runner-bench-before --preset tinyglm --cells decode_c1,decode_c4,decode_c8 --runs 2 --gpu-memory-utilization 0.5
  rb tinyglm-bf16-after-$i ./build/bench/sparkglm-runner-bench --preset tinyglm --cells decode_c1,decode_c4,decode_c8 --runs 2 --gpu-memory-utilization 0.5
done
python3 - $R <<'PY'
import json, sys, glob
for f in sorted(glob.glob(sys.argv[1] + "/rb-*.json")):
    d = json.load(open(f))
    print(f.split("/")[-1], " ".join("%s %.3f ms (%.1f %%)" % (c["cell"], c["median_ms"], 100 * c["fraction_of_floor"]) for c in d["cells"]))
PY
