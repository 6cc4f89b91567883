# call 4 (issue 15): main (ce953e0, PDL wait-first) and pdl-prefetch (its patch: first weights
# before the wait), built side by side; every CUDA test on the patch; runner bench alternated.
set -u; T0=$(date +%s); R=/tmp/R; mkdir -p $R /tmp/devroot; W=/tmp/pf
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
el() { echo "[+$(( $(date +%s) - T0 ))s] $*" | tee -a $R/summary.txt; }
fin() { tar czf $OUT/results.tgz -C /tmp R; cp $R/summary.txt $OUT/; }; trap fin EXIT
for f in .devroot/*.deb; do dpkg -x $f /tmp/devroot; done
mkdir -p /tmp/devroot/rt && cp -a /tmp/devroot/usr/lib/x86_64-linux-gnu/*.so* /tmp/devroot/rt/ 2>/dev/null; cp -a /tmp/devroot/lib/x86_64-linux-gnu/*.so* /tmp/devroot/rt/ 2>/dev/null
rm -rf $W && mkdir -p $W && tar --exclude=./build --exclude=./.devroot --exclude=./.devrun -cf - . | tar -xf - -C $W
(cd $W && git apply $OLDPWD/.devroot/pdl-prefetch.patch) || { el PATCH-FAILED; exit 1; }
cfg() { cmake -S $1 -B $1/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DSPARKGLM_TESTS=ON -DCMAKE_CUDA_ARCHITECTURES=90a \
  -DCMAKE_PREFIX_PATH=/tmp/devroot/usr -DCMAKE_EXE_LINKER_FLAGS=-Wl,--disable-new-dtags,-rpath,/tmp/devroot/rt > $R/cmake-$2.log 2>&1; }
cfg $(pwd) main & cfg $W pf & wait
cmake --build build -j 6 --target sparkglm-runner-bench > $R/build-main.log 2>&1 & P1=$!
cmake --build $W/build -j 10 --target sparkglm_cuda_tests sparkglm-runner-bench > $R/build-pf.log 2>&1; el "pf build rc=$?"
wait $P1; el "main build rc=$?"
timeout 280 $W/build/tests/sparkglm_cuda_tests --gtest_output=json:$R/pf-tests.json > $R/pf-tests.log 2>&1; el "pf tests rc=$?"
grep -E "^\[  (PASSED|FAILED)|FAILED  \]" $R/pf-tests.log | head -20 | tee -a $R/summary.txt
for i in 1 2; do for v in main pf; do
  B=./build/bench/sparkglm-runner-bench; [ $v = pf ] && B=$W/build/bench/sparkglm-runner-bench
  timeout 60 $B --device cuda --preset tinyglm --cells decode_c1,decode_c4,decode_c8 --runs 2 \
    --gpu-memory-utilization 0.5 --out $R/rb-tinyglm-bf16-$v-$i.json > $R/rb-tinyglm-$v-$i.log 2>&1; el "tinyglm $v $i rc=$?"
  timeout 100 $B --device cuda --preset glm-5.3-flash --num-layers 28 --weight-format fp4-local \
    --cells decode_c1,decode_c4,decode_c8 --runs 2 --max-seconds 80 --out $R/rb-glm28-fp4-$v-$i.json > $R/rb-glm28-$v-$i.log 2>&1; el "glm28 $v $i rc=$?"
  [ $(( $(date +%s) - T0 )) -gt 540 ] && break 2
done; done
