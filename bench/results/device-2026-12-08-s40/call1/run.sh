# Binaries built on the developer machine: runtime libs from the carried debs, then step.sh.
mkdir -p /tmp/rtroot /tmp/rt build/tests build/bench /tmp/R
for f in .devbin/*.deb; do dpkg -x $f /tmp/rtroot; done
cp -a /tmp/rtroot/usr/lib/x86_64-linux-gnu/*.so* /tmp/rt/ 2>/dev/null; cp -a /tmp/rtroot/lib/x86_64-linux-gnu/*.so* /tmp/rt/ 2>/dev/null
export LD_LIBRARY_PATH=/tmp/rt:${LD_LIBRARY_PATH:-} SPARKGLM_SOURCE_DIR=$PWD
for b in .devbin/*.xz; do n=$(basename $b .xz); case $n in sparkglm_cuda_tests*) d=build/tests;; *) d=build/bench;; esac
  xz -dc $b > $d/$n; chmod +x $d/$n; done
ldd build/tests/sparkglm_cuda_tests | grep "not found"; nvidia-smi --query-gpu=name --format=csv,noheader
bash .devbin/step.sh /tmp/R 2>&1 | tee $OUT/step.log
tar czf $OUT/r.tgz -C /tmp R
