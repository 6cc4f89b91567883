# Issue 19: the drafter's chained MTP passes in CUDA graphs (branch mtp-pass-graphs, its patch here),
# built beside main: the speculation CUDA tests on the patch (the new
# CudaSpeculation.AChainedMtpPassComputesTheSameBitsFromItsGraphAndEagerly among them), then
# speculation_bench on the chain-trained checkpoint at C1 and C4, main and patch alternated.
R=$1; W=/tmp/mg
rm -rf $W && mkdir -p $W && tar --exclude=./build --exclude=./.devroot --exclude=./.devrun -cf - . | tar -xf - -C $W
(cd $W && git apply bench/results/h200-pending/mtp-pass-graphs.patch) || { echo PATCH-FAILED; exit 1; }
cmake -S $W -B $W/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DSPARKGLM_TESTS=ON -DCMAKE_CUDA_ARCHITECTURES=90a \
  -DCMAKE_PREFIX_PATH=/tmp/devroot/usr -DCMAKE_EXE_LINKER_FLAGS=-Wl,--disable-new-dtags,-rpath,/tmp/devroot/rt > $R/mg-cmake.log 2>&1
cmake --build $W/build -j 16 --target sparkglm_cuda_tests speculation_bench > $R/mg-build.log 2>&1 || { tail -30 $R/mg-build.log; exit 1; }
timeout 150 $W/build/tests/sparkglm_cuda_tests --gtest_filter='*CudaSpeculation*' > $R/mg-tests.log 2>&1; echo "tests rc=$?"
grep -E "^\[  (PASSED|FAILED)|FAILED  \]" $R/mg-tests.log
M=tinyglm/weights/tinyglm-micro-trained-mtp-chain; P=tinyglm/weights/tinyglm-micro-trained/heldout.json
for i in 1 2; do for v in main mg; do
  B=./build/bench/speculation_bench; [ $v = mg ] && B=$W/build/bench/speculation_bench
  timeout 60 $B --device cuda --model $M --prompts $P --k 0,1,2,3 --concurrency 1,4 --max-tokens 128 \
    --reps 3 > $R/spec-mg-$v-$i.json 2> $R/spec-mg-$v-$i.log; echo "$v $i rc=$?"
done; done
