# gemv-rows-loads.patch (session 26, compiled, not run): the CUDA-core GEMV of 2-8 rows requests
# every x row's chunk before using any (no branch between the rows), where today it waits one
# memory latency a row. Builds the patched tree in /tmp/gl and runs every CUDA test there.
# Copy into .devroot/ as step_gl.sh with the patch beside it; run after `build` (dev.sh).
R=$1; W=/tmp/gl
rm -rf $W && mkdir -p $W && tar --exclude=./build --exclude=./.devroot --exclude=./.devrun -cf - . | tar -xf - -C $W
(cd $W && git apply $OLDPWD/.devroot/gemv-rows-loads.patch) || { echo PATCH-FAILED; exit 1; }
cmake -S $W -B $W/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DSPARKGLM_TESTS=ON -DCMAKE_CUDA_ARCHITECTURES=90a \
  -DCMAKE_PREFIX_PATH=/tmp/devroot/usr -DCMAKE_EXE_LINKER_FLAGS=-Wl,--disable-new-dtags,-rpath,/tmp/devroot/rt > $R/gl-cmake.log 2>&1
cmake --build $W/build -j 16 --target sparkglm_cuda_tests speculation_bench > $R/gl-build.log 2>&1 || { tail -30 $R/gl-build.log; exit 1; }
timeout 300 $W/build/tests/sparkglm_cuda_tests > $R/gl-tests.log 2>&1; echo "gl all rc=$?"
grep -E "^\[  (PASSED|FAILED)|FAILED  \]" $R/gl-tests.log | head -20
