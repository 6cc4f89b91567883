# Session 17 call 2: carried binaries (Debian, g++ 12, CUDA 13.0). gemv_bf16 streamed through
# shared memory (GemvKernel::kStream) against the 2026-12-02 kernel: the CUDA tests of the
# touched paths, G1 of the BF16 linear rows (peer "baseline" in the same run; g1_operators_g4 is
# the same tree with 4-group stages, 5 blocks an SM: the stage size asked of the device), Nsight
# Compute on both kernels at [4104, 4096], then tinyglm BF16 decode with the runner bench of HEAD
# (b1a1fb8, "before") and of this tree, alternated.
set -x
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
R=/tmp/R2; mkdir -p $R build /tmp/devroot
fin() { tar czf $OUT/r2.tgz -C /tmp R2; }
trap fin EXIT
for f in .devrun/*.deb; do dpkg -x $f /tmp/devroot; done
mkdir -p /tmp/devroot/rt && cp -a /tmp/devroot/usr/lib/x86_64-linux-gnu/*.so* /tmp/devroot/rt/ 2>/dev/null
export LD_LIBRARY_PATH=/tmp/devroot/rt SPARKGLM_SOURCE_DIR="$(pwd)"
tar xzf .devrun/bins.tgz -C build
T0=$(date +%s); el() { echo "$1 rc=$2 after $(( $(date +%s) - T0 ))s" | tee -a $R/summary.txt; }
timeout 150 ./build/tests/sparkglm_cuda_tests --gtest_filter='CudaOperators.*:CudaModelRunner.*:ServedModels/*:Batch/*:Rollback/*:CudaStepPipeline.*:CudaMoe*:SparkMoe.*' --gtest_output=json:$R/tests.json > $R/tests.log 2>&1; el tests $?
grep -E "^\[  (PASSED|FAILED|SKIPPED)|FAILED  \]" $R/tests.log | head -20
timeout 120 ./build/bench/cuda/g1_operators --only linear --runs 30 --out $R/g1-linear.json > $R/g1.log 2>&1; el g1 $?
timeout 100 ./build/bench/cuda/g1_operators_g4 --only linear --runs 30 --out $R/g1-linear-g4.json > $R/g1-g4.log 2>&1; el g1g4 $?
timeout 60 ncu --set full --kernel-name regex:'gemv_(stream|mma)_kernel' --launch-skip 54 --launch-count 1 -o $R/ncu-stream ./build/tests/sparkglm_cuda_tests --gtest_filter=CudaOperators.StreamedGemvMatchesTheBaselineBitForBit > $R/ncu.log 2>&1; el ncu $?
ncu --import $R/ncu-stream.ncu-rep --page details > $R/ncu-stream.txt 2>&1
for i in 1 2; do
  for v in before after; do
    b=./build/bench/sparkglm-runner-bench; [ $v = before ] && b=./build/sparkglm-runner-bench-before
    timeout 60 $b --device cuda --preset tinyglm --cells decode_c1,decode_c4,decode_c8 --runs 2 --gpu-memory-utilization 0.5 --out $R/rb-tinyglm-bf16-$v-$i.json > $R/rb-$v-$i.log 2>&1; el rb-$v-$i $?
  done
done
python3 - $R <<'PY'
import json, sys, glob
for f in sorted(glob.glob(sys.argv[1] + "/rb-tinyglm-*.json")):
    d = json.load(open(f))
    print(f.split("/")[-1], " ".join("%s %.3f ms (%.1f %%)" % (c["cell"], c["median_ms"], 100 * c["fraction_of_floor"]) for c in d["cells"]))
PY
