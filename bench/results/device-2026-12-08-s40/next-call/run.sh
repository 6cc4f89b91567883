# Binaries built on the developer machine: runtime libs from the carried debs, then the steps.
mkdir -p /tmp/rtroot /tmp/rt build/bench /tmp/R
for f in .devbin3/*.deb; do dpkg -x $f /tmp/rtroot; done
cp -a /tmp/rtroot/usr/lib/x86_64-linux-gnu/*.so* /tmp/rt/ 2>/dev/null; cp -a /tmp/rtroot/lib/x86_64-linux-gnu/*.so* /tmp/rt/ 2>/dev/null
export LD_LIBRARY_PATH=/tmp/rt:${LD_LIBRARY_PATH:-} SPARKGLM_SOURCE_DIR=$PWD
mkdir -p build/tests; for b in .devbin3/*.xz; do n=$(basename $b .xz); case $n in sparkglm_cuda_tests) d=build/tests;; *) d=build/bench;; esac; xz -dc $b > $d/$n; chmod +x $d/$n; done
./build/tests/sparkglm_cuda_tests --gtest_filter='CudaNorms.*:*CudaSpeculation*' 2>&1 | grep -E "^\[  (PASSED|FAILED|SKIPPED) +\]|FAILED  \]|OK \]" | tee $OUT/norms.log
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
bash .devbin3/probe.sh /tmp/R 2>&1 | tee $OUT/probe.log; cp /tmp/R/probe-* $OUT/ 2>/dev/null
case "$(nvidia-smi --query-gpu=name --format=csv,noheader)" in *H200*) bash .devbin3/step.sh /tmp/R 2>&1 | tee $OUT/step.log;; *) echo "not an H200: no runner-bench cells";; esac
tar czf $OUT/r.tgz -C /tmp R
