# Session 24, call 3: the KDA verify slices (kSlices template, q/k/v history blocks) and the select
# kernel's parallel byte pick: build the two targets, their tests, ncu of the kernels, one bench.
set -u; T0=$(date +%s); R=/tmp/R3; mkdir -p $R
trap 'tar czf $OUT/results3.tgz -C /tmp R3' EXIT
log() { echo "[+$(( $(date +%s) - T0 ))s] $*" | tee -a $R/summary.txt; }
mkdir -p /tmp/devroot && for f in .devroot/*.deb; do dpkg -x $f /tmp/devroot; done
mkdir -p /tmp/devroot/rt && cp -a /tmp/devroot/usr/lib/x86_64-linux-gnu/*.so* /tmp/devroot/rt/ 2>/dev/null; cp -a /tmp/devroot/lib/x86_64-linux-gnu/*.so* /tmp/devroot/rt/ 2>/dev/null
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DSPARKGLM_WERROR=ON -DCMAKE_CUDA_ARCHITECTURES=90a \
  -DCMAKE_PREFIX_PATH=/tmp/devroot/usr -DCMAKE_EXE_LINKER_FLAGS=-Wl,--disable-new-dtags,-rpath,/tmp/devroot/rt > $R/cmake.log 2>&1
cmake --build build -j 16 --target sparkglm_cuda_tests speculation_bench > $R/build.log 2>&1 || { tail -30 $R/build.log; exit 1; }
log built
timeout 60 ./build/tests/sparkglm_cuda_tests --gtest_filter='*Dsa*:*Verify*:*Rollback*:*Specul*:*Kda*:*Batch*' > $R/tests.log 2>&1; log "tests rc=$?"
grep -E "^\[  (PASSED|FAILED)|FAILED  \]" $R/tests.log | head -20
M=tinyglm/weights/tinyglm-micro-trained-mtp-chain; P=tinyglm/weights/tinyglm-micro-trained/heldout.json
timeout 25 ncu --clock-control none --metrics gpu__time_duration.sum --csv --launch-skip 4000 --launch-count 1000 \
  ./build/bench/speculation_bench --device cuda --model $M --prompts $P --k 3 --concurrency 1 --max-tokens 96 --reps 1 \
  > $R/ncu-k3.csv 2> $R/ncu-k3.log; log "ncu rc=$?"; gzip -f $R/ncu-k3.csv
timeout 20 ./build/bench/speculation_bench --device cuda --model $M --prompts $P --k 0,2,3 --concurrency 1,4 \
  --max-tokens 128 --reps 3 > $R/bench.json 2> $R/bench.log; log "bench rc=$?"
