# Session 26, call 5: the tree (HEAD + a verify step's results in one launch, segment_copy.h)
# built by ci/build.sh; HEAD itself built beside it in /tmp/base (the tree with
# .devroot/segcopy.patch reversed: the device's .git stands at the session's base commit);
# every CUDA test on the tree; speculation_bench alternated five times between the two builds.
R=$1; W=/tmp/base
rm -rf $W && mkdir -p $W && tar --exclude=./build --exclude=./.devroot --exclude=./.devrun -cf - . | tar -xf - -C $W
(cd $W && git apply -R $OLDPWD/.devroot/segcopy.patch) || { echo REVERSE-FAILED; exit 1; }
cmake -S $W -B $W/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DSPARKGLM_TESTS=ON -DCMAKE_CUDA_ARCHITECTURES=90a \
  -DCMAKE_PREFIX_PATH=/tmp/devroot/usr -DCMAKE_EXE_LINKER_FLAGS=-Wl,--disable-new-dtags,-rpath,/tmp/devroot/rt > $R/base-cmake.log 2>&1
cmake --build $W/build -j 16 --target speculation_bench > $R/base-build.log 2>&1 || { tail -30 $R/base-build.log; exit 1; }
echo "base built"
timeout 200 ./build/tests/sparkglm_cuda_tests > $R/sc-tests.log 2>&1; echo "cuda tests rc=$?"
grep -E "^\[  (PASSED|FAILED)|FAILED  \]" $R/sc-tests.log | head -20
M=tinyglm/weights/tinyglm-micro-trained-mtp-chain; P=tinyglm/weights/tinyglm-micro-trained/heldout.json
for i in 1 2 3 4 5; do for v in base seg; do
  B=./build/bench/speculation_bench; [ $v = base ] && B=$W/build/bench/speculation_bench
  timeout 40 $B --device cuda --model $M --prompts $P --k 0,2,3 --concurrency 1,4 --max-tokens 128 \
    --reps 3 > $R/sc-bench-$v-$i.json 2> $R/sc-bench-$v-$i.log; echo "$v $i rc=$?"
done; done
