# Binaries built on the developer machine (the session's device build ran in call 1): runtime libs
# from the carried debs, then step_fix.sh.
mkdir -p /tmp/rtroot /tmp/rt build/tests build/bench /tmp/R
for f in .devbin/*.deb; do dpkg -x $f /tmp/rtroot; done
cp -a /tmp/rtroot/usr/lib/x86_64-linux-gnu/*.so* /tmp/rt/ 2>/dev/null; cp -a /tmp/rtroot/lib/x86_64-linux-gnu/*.so* /tmp/rt/ 2>/dev/null
export LD_LIBRARY_PATH=/tmp/rt:${LD_LIBRARY_PATH:-} SPARKGLM_SOURCE_DIR=$PWD
gunzip -c .devbin/sparkglm_cuda_tests.gz > build/tests/sparkglm_cuda_tests; gunzip -c .devbin/speculation_bench.gz > build/bench/speculation_bench
chmod +x build/tests/sparkglm_cuda_tests build/bench/speculation_bench
ldd build/tests/sparkglm_cuda_tests | grep "not found"; nvidia-smi --query-gpu=name --format=csv,noheader
bash .devbin/step_fix.sh /tmp/R 2>&1 | tee $OUT/fix.log
tar czf $OUT/r.tgz -C /tmp R
