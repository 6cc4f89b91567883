# Branch mtp-pass-graphs (its patch) built beside main in /tmp/mg; its speculation CUDA tests.
R=$1; W=/tmp/mg; cp .devroot/mtp-pass-graphs.patch /tmp/mg-patch
rm -rf $W && mkdir -p $W && tar --exclude=./build --exclude=./.devroot --exclude=./.devrun -cf - . | tar -xf - -C $W
(cd $W && git apply '/tmp/mg-patch') || { echo PATCH-FAILED; exit 1; }
cmake -S $W -B $W/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DSPARKGLM_TESTS=ON -DCMAKE_CUDA_ARCHITECTURES=90a \
  -DCMAKE_PREFIX_PATH=/tmp/devroot/usr -DCMAKE_EXE_LINKER_FLAGS=-Wl,--disable-new-dtags,-rpath,/tmp/devroot/rt > $R/mg-cmake.log 2>&1
cmake --build $W/build -j 16 --target sparkglm_cuda_tests speculation_bench > $R/mg-build.log 2>&1 || { tail -30 $R/mg-build.log; exit 1; }
timeout 150 $W/build/tests/sparkglm_cuda_tests --gtest_filter='*CudaSpeculation*' > $R/mg-tests.log 2>&1; echo "tests rc=$?"
grep -E "^\[  (PASSED|FAILED)|FAILED  \]" $R/mg-tests.log
