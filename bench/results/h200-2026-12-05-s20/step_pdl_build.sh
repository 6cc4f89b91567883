# branch pdl-wait-first as a patch on this tree, built beside it (issue 15)
R=$1; W=/tmp/pdl
rm -rf $W && mkdir -p $W && tar --exclude=./build --exclude=./.devroot --exclude=./.devrun -cf - . | tar -xf - -C $W
(cd $W && git apply bench/results/h200-2026-12-04-s17/pdl-wait-first.patch) || { echo PATCH-FAILED; exit 1; }
cmake -S $W -B $W/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DSPARKGLM_TESTS=ON -DCMAKE_CUDA_ARCHITECTURES=90a \
  -DCMAKE_PREFIX_PATH=/tmp/devroot/usr -DCMAKE_EXE_LINKER_FLAGS=-Wl,--disable-new-dtags,-rpath,/tmp/devroot/rt > $R/pdl-cmake.log 2>&1
cmake --build $W/build -j ${JOBS:-8} --target sparkglm_cuda_tests sparkglm-runner-bench > $R/pdl-build.log 2>&1 || { tail -30 $R/pdl-build.log; exit 1; }
echo pdl-built
