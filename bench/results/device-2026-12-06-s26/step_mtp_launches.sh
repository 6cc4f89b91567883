# Session 25's pending mtp-pass-launches.patch: build it in a copy (/tmp/ml), every CUDA test there,
# then speculation_bench against the tree's own build alternated five times, and ncu kernel counts.
# Copy into .devroot/ with the patch beside it; run after `build` (dev.sh).
R=$1; W=/tmp/ml
rm -rf $W && mkdir -p $W && tar --exclude=./build --exclude=./.devroot --exclude=./.devrun -cf - . | tar -xf - -C $W
(cd $W && git apply $OLDPWD/.devroot/mtp-pass-launches.patch) || { echo PATCH-FAILED; exit 1; }
cmake -S $W -B $W/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DSPARKGLM_TESTS=ON -DCMAKE_CUDA_ARCHITECTURES=90a \
  -DCMAKE_PREFIX_PATH=/tmp/devroot/usr -DCMAKE_EXE_LINKER_FLAGS=-Wl,--disable-new-dtags,-rpath,/tmp/devroot/rt > $R/ml-cmake.log 2>&1
cmake --build $W/build -j 16 --target sparkglm_cuda_tests speculation_bench > $R/ml-build.log 2>&1 || { tail -30 $R/ml-build.log; exit 1; }
timeout 280 $W/build/tests/sparkglm_cuda_tests > $R/ml-tests.log 2>&1; echo "ml all rc=$?"
grep -E "^\[  (PASSED|FAILED)|FAILED  \]" $R/ml-tests.log | head -20
M=tinyglm/weights/tinyglm-micro-trained-mtp-chain; P=tinyglm/weights/tinyglm-micro-trained/heldout.json
for i in 1 2 3 4 5; do for v in main ml; do
  B=./build/bench/speculation_bench; [ $v = ml ] && B=$W/build/bench/speculation_bench
  timeout 30 $B --device cuda --model $M --prompts $P --k 0,2,3 --concurrency 1,4 --max-tokens 128 \
    --reps 3 > $R/ml-bench-$v-$i.json 2> $R/ml-bench-$v-$i.log; echo "$v $i rc=$?"
done; done
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
timeout 40 $NCU --clock-control none --metrics gpu__time_duration.sum --csv --launch-skip 4000 --launch-count 1000 \
  $W/build/bench/speculation_bench --device cuda --model $M --prompts $P --k 2 --concurrency 1 --max-tokens 96 --reps 1 \
  > $R/ncu-ml-k2.csv 2> $R/ncu-ml-k2.log; echo "ncu rc=$?"; gzip -f $R/ncu-ml-k2.csv
