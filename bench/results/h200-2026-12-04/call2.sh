# Session 16 call 2: carried binaries (Debian, g++ 12, CUDA 13.0, this tree). Nsight Compute on
# quantized_gemv (streamed and baseline, MXFP8 4096 x 4096, 1 row), then glm-5.3-flash fp4-local
# 28 layers decode C1/C4/C8.
set -x
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
R=/tmp/R2; mkdir -p $R build /tmp/devroot
fin() { tar czf $OUT/r2.tgz -C /tmp R2; }
trap fin EXIT
for f in .devrun/*.deb; do dpkg -x $f /tmp/devroot; done
mkdir -p /tmp/devroot/rt && cp -a /tmp/devroot/usr/lib/x86_64-linux-gnu/*.so* /tmp/devroot/rt/ 2>/dev/null
export LD_LIBRARY_PATH=/tmp/devroot/rt
tar xzf .devrun/bins.tgz -C build
export SPARKGLM_SOURCE_DIR="$(pwd)"
T0=$(date +%s)
timeout 200 ncu --set full --kernel-name regex:quantized_gemv_kernel --launch-skip 32 --launch-count 2 -o $R/ncu21 ./build/tests/sparkglm_cuda_tests --gtest_filter=CudaQuantizedGemv.CurrentKernelMatchesTheBaselineBitForBit > $R/ncu21.log 2>&1
echo "ncu rc=$? after $(( $(date +%s) - T0 ))s"
ncu --import $R/ncu21.ncu-rep --page details > $R/ncu21.txt 2>&1
timeout 240 ./build/bench/sparkglm-runner-bench --device cuda --preset glm-5.3-flash --num-layers 28 --weight-format fp4-local --cells decode_c1,decode_c4,decode_c8 --runs 2 --max-seconds 150 --out $R/rb-stream21-glm28-fp4.json > $R/rb-glm28.log 2>&1
echo "glm28 rc=$? after $(( $(date +%s) - T0 ))s"
tail -5 $R/rb-glm28.log
