# Issue 15: branch pdl-wait-first (its patch, bench/results/h200-2026-12-04-s17/pdl-wait-first.patch)
# built beside main, its CUDA tests, then the runner bench of main and of the patch, alternated.
R=$1; W=/tmp/pdl
rm -rf $W && git worktree add -f $W HEAD >/dev/null && (cd $W && git apply bench/results/h200-2026-12-04-s17/pdl-wait-first.patch)
cmake -S $W -B $W/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DSPARKGLM_TESTS=ON -DCMAKE_CUDA_ARCHITECTURES=90a \
  -DCMAKE_PREFIX_PATH=/tmp/devroot/usr -DCMAKE_EXE_LINKER_FLAGS=-Wl,--disable-new-dtags,-rpath,/tmp/devroot/rt > $R/pdl-cmake.log 2>&1
cmake --build $W/build -j 16 --target sparkglm_cuda_tests sparkglm-runner-bench > $R/pdl-build.log 2>&1 || { tail -30 $R/pdl-build.log; exit 1; }
timeout 240 $W/build/tests/sparkglm_cuda_tests > $R/pdl-tests.log 2>&1; echo "pdl tests rc=$?"
grep -E "^\[  (PASSED|FAILED)|FAILED  \]" $R/pdl-tests.log | head -20
for i in 1 2; do
  for v in main pdl; do
    B=./build/bench/sparkglm-runner-bench; [ $v = pdl ] && B=$W/build/bench/sparkglm-runner-bench
    timeout 60 $B --device cuda --preset tinyglm --cells decode_c1,decode_c4,decode_c8 --runs 2 \
      --gpu-memory-utilization 0.5 --out $R/rb-tinyglm-bf16-$v-$i.json > /dev/null 2>&1
    timeout 100 $B --device cuda --preset glm-5.3-flash --num-layers 28 --weight-format fp4-local \
      --cells decode_c1,decode_c4,decode_c8 --runs 2 --max-seconds 80 --out $R/rb-glm28-fp4-$v-$i.json > /dev/null 2>&1
  done
done
