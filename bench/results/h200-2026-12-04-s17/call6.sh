# Session 17 call 6: carried binaries (Debian, g++ 12, CUDA 13.0). Programmatic dependent launch
# for the decode GEMVs (pdl.cuh): gemv_bf16's kernels, quantized_gemv and the split sums start
# before the kernel ahead of them finishes, issue their first weight copies, then wait; the
# norms, the SwiGLU, the KDA output gate and the GEMVs let them be scheduled from their start.
# Every CUDA test (the runners' graph against eager and CPU among them), then the runner bench of
# 593fc30 ("before") and of this tree ("after"), alternated: tinyglm BF16 twice, glm-5.3-flash
# fp4-local 28 layers once each.
set -x
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
R=/tmp/R6; mkdir -p $R build /tmp/devroot
fin() { tar czf $OUT/r6.tgz -C /tmp R6; }
trap fin EXIT
for f in .devrun/*.deb; do dpkg -x $f /tmp/devroot; done
mkdir -p /tmp/devroot/rt && cp -a /tmp/devroot/usr/lib/x86_64-linux-gnu/*.so* /tmp/devroot/rt/ 2>/dev/null
export LD_LIBRARY_PATH=/tmp/devroot/rt SPARKGLM_SOURCE_DIR="$(pwd)"
tar xzf .devrun/bins.tgz -C build
T0=$(date +%s); el() { echo "$1 rc=$2 after $(( $(date +%s) - T0 ))s" | tee -a $R/summary.txt; }
timeout 240 ./build/tests/sparkglm_cuda_tests --gtest_output=json:$R/tests.json > $R/tests.log 2>&1; el tests $?
grep -E "^\[  (PASSED|FAILED|SKIPPED)|FAILED  \]" $R/tests.log | head -20
rb() { # name binary args...
  local n=$1 b=$2; shift 2
  timeout 120 $b --device cuda "$@" --out $R/rb-$n.json > $R/rb-$n.log 2>&1; el rb-$n $?
}
for i in 1 2; do
  rb tinyglm-bf16-before-$i ./build/sparkglm-runner-bench-before --preset tinyglm --cells decode_c1,decode_c4,decode_c8 --runs 2 --gpu-memory-utilization 0.5
  rb tinyglm-bf16-after-$i ./build/bench/sparkglm-runner-bench --preset tinyglm --cells decode_c1,decode_c4,decode_c8 --runs 2 --gpu-memory-utilization 0.5
done
rb glm28-fp4-before ./build/sparkglm-runner-bench-before --preset glm-5.3-flash --num-layers 28 --weight-format fp4-local --cells decode_c1,decode_c4,decode_c8 --runs 2 --max-seconds 60
rb glm28-fp4-after ./build/bench/sparkglm-runner-bench --preset glm-5.3-flash --num-layers 28 --weight-format fp4-local --cells decode_c1,decode_c4,decode_c8 --runs 2 --max-seconds 60
python3 - $R <<'PY'
import json, sys, glob
for f in sorted(glob.glob(sys.argv[1] + "/rb-*.json")):
    d = json.load(open(f))
    print(f.split("/")[-1], " ".join("%s %.3f ms (%.1f %%)" % (c["cell"], c["median_ms"], 100 * c["fraction_of_floor"]) for c in d["cells"]))
PY
