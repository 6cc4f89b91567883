# session 22, call 4: is the wide model's long sparse mismatch on the GPU tied to its second MLA
# layer? The same trained weights cut to layers 0-3 (one MLA layer) plus the MTP layer.
set -u; mkdir -p /tmp/R; R=/tmp/R
mkdir -p /tmp/devroot && for f in .devroot/*.deb; do dpkg -x $f /tmp/devroot; done && mkdir -p /tmp/devroot/rt && cp -a /tmp/devroot/usr/lib/x86_64-linux-gnu/*.so* /tmp/devroot/rt/ 2>/dev/null; cp -a /tmp/devroot/lib/x86_64-linux-gnu/*.so* /tmp/devroot/rt/ 2>/dev/null
unxz .devroot/wide-cut4/model-00001-of-00001.safetensors.xz
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DSPARKGLM_TESTS=ON -DCMAKE_CUDA_ARCHITECTURES=90a \
  -DCMAKE_PREFIX_PATH=/tmp/devroot/usr -DCMAKE_EXE_LINKER_FLAGS=-Wl,--disable-new-dtags,-rpath,/tmp/devroot/rt > $R/c4-cmake.log 2>&1
time cmake --build build -j 16 --target sparkglm_cuda_tests > $R/c4-build.log 2>&1 || { tail -30 $R/c4-build.log; }
SPARKGLM_TEST_WIDE_CHECKPOINT=.devroot/wide-cut4 timeout 60 ./build/tests/sparkglm_cuda_tests --gtest_filter='ServedModels/CudaModelRunnerOn.*tinyglm_wide*' > $R/cut4-tests.log 2>&1
echo "cut4 tests rc=$?"; grep -E "NMSE|OK|FAILED|Failure|actual|rows off" $R/cut4-tests.log | head -30
cp $R/cut4-tests.log $OUT/
