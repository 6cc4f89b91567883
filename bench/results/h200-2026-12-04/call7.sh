# Session 16 call 7: quantized_gemv after the review's mend (read_group takes the caller's column
# guard; the stream path's full stages read through it too): its tests, carried test binary.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
mkdir -p build /tmp/devroot/rt && tar xzf .devrun/bins.tgz -C build
for f in .devrun/libssl3*.deb; do dpkg -x $f /tmp/devroot; done; cp -a /tmp/devroot/usr/lib/x86_64-linux-gnu/*.so* /tmp/devroot/rt/; export LD_LIBRARY_PATH=/tmp/devroot/rt
export SPARKGLM_SOURCE_DIR="$(pwd)"
timeout 90 ./build/tests/sparkglm_cuda_tests --gtest_filter=CudaQuantizedGemv.* > $OUT/tests-call6.log 2>&1
echo "tests rc=$?"
grep -E "^\[  (PASSED|FAILED|SKIPPED)|FAILED  \]|^\[==========\]" $OUT/tests-call6.log
