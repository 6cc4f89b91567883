# Ran from ../h200-pending/ (its steps and patches moved here after the call; set P to this
# folder to run it again).
# Session 27's fourth device visit (the session's last ~290 s of device time): the tree with
# chain-graph.patch (uncommitted) configured as ci/build.sh does and only the CUDA tests and the
# bench built (ci/build.sh itself ran in calls 1-3 today), then step_chain_graph.sh. Results in
# $OUT/results.tgz as dev.sh leaves them.
set -u
R=/tmp/R; mkdir -p $R; T0=$(date +%s)
trap 'tar czf $OUT/results.tgz -C /tmp R' EXIT
log() { echo "[+$(( $(date +%s) - T0 ))s] $*" | tee -a $R/summary.txt; }
P=bench/results/h200-pending
cp $P/chain-graph.patch $P/variant.sh .devroot/
mkdir -p /tmp/devroot && for f in .devroot/*.deb; do dpkg -x $f /tmp/devroot; done
mkdir -p /tmp/devroot/rt && cp -a /tmp/devroot/usr/lib/x86_64-linux-gnu/*.so* /tmp/devroot/rt/ 2>/dev/null
cp -a /tmp/devroot/lib/x86_64-linux-gnu/*.so* /tmp/devroot/rt/ 2>/dev/null
log "configure"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DSPARKGLM_TESTS=ON \
  -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_PREFIX_PATH=/tmp/devroot/usr \
  -DCMAKE_EXE_LINKER_FLAGS=-Wl,--disable-new-dtags,-rpath,/tmp/devroot/rt > $R/cmake.log 2>&1
log "build"
cmake --build build -j 16 --target sparkglm_cuda_tests speculation_bench > $R/build.log 2>&1 ||
  { tail -30 $R/build.log; exit 1; }
log "tests + A/B"
timeout 200 bash $P/step_chain_graph.sh $R > $R/cg.log 2>&1
log "done"
tail -25 $R/cg.log
