# Session 24: kda-verify-slices.patch applied to a copy of the tree in /tmp/vs and built there.
R=$1; W=/tmp/vs; cp .devroot/kda-verify-slices.patch /tmp/vs-patch
rm -rf $W && mkdir -p $W && tar --exclude=./build --exclude=./.devroot --exclude=./.devrun -cf - . | tar -xf - -C $W
(cd $W && git apply /tmp/vs-patch) || { echo PATCH-FAILED; exit 1; }
cmake -S $W -B $W/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DSPARKGLM_TESTS=ON -DCMAKE_CUDA_ARCHITECTURES=90a \
  -DCMAKE_PREFIX_PATH=/tmp/devroot/usr -DCMAKE_EXE_LINKER_FLAGS=-Wl,--disable-new-dtags,-rpath,/tmp/devroot/rt > $R/vs-cmake.log 2>&1
time cmake --build $W/build -j 16 --target sparkglm_cuda_tests speculation_bench > $R/vs-build.log 2>&1 || { tail -40 $R/vs-build.log; exit 1; }
