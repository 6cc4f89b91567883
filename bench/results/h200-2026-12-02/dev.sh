#!/usr/bin/env bash
# Device driver: runs the steps not yet done on this machine, within a deadline; cumulative
# results in /tmp/R, tarred to $OUT each call. Usage: bash .devroot/dev.sh [budget_s] [steps...]
set -u
T0=$(date +%s); BUDGET=${1:-570}; shift || true
END=$((T0 + BUDGET))
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
R=/tmp/R; S=/tmp/S; mkdir -p $R $S
ROOT=$(pwd)
left() { echo $((END - $(date +%s))); }
log() { echo "[$(date +%H:%M:%S) +$(( $(date +%s) - T0 ))s] $*" | tee -a $R/summary.txt; }
step() { # name maxsecs command...
  local n=$1 max=$2; shift 2
  if [ -e $S/$n.done ]; then return 0; fi
  local l; l=$(left); [ $l -gt $max ] && l=$max
  if [ $l -lt 20 ]; then log "skip $n (no time)"; return 1; fi
  log "start $n (limit ${l}s)"
  timeout -k 5 $l bash -c "$*" > $R/$n.log 2>&1; local rc=$?
  log "end $n rc=$rc"
  if [ $n = build ]; then [ $rc -eq 0 ] && touch $S/$n.done; elif [ $rc -ne 124 ] && [ $rc -ne 137 ]; then touch $S/$n.done; fi
  return 0
}
finish() { cp $R/summary.txt $OUT/ 2>/dev/null; tar czf $OUT/results.tgz -C /tmp R; exit 0; }
trap finish EXIT
STEPS=${*:-"build cuda_tests serve70k rb16 rb20 ab17 disk17"}
for s in $STEPS; do
  case $s in
  build) step build 560 "mkdir -p /tmp/devroot && for f in .devroot/*.deb; do dpkg -x \$f /tmp/devroot; done && for t in .devroot/*.tar.xz; do [ -e \$t ] && tar xJf \$t -C /tmp/devroot; done; mkdir -p /tmp/devroot/rt && cp -a /tmp/devroot/usr/lib/x86_64-linux-gnu/*.so* /tmp/devroot/rt/ 2>/dev/null; cp -a /tmp/devroot/lib/x86_64-linux-gnu/*.so* /tmp/devroot/rt/ 2>/dev/null; nvidia-smi; nproc; g++ --version | head -1; time bash ci/build.sh -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_PREFIX_PATH=/tmp/devroot/usr -DCMAKE_EXE_LINKER_FLAGS=-Wl,--disable-new-dtags,-rpath,/tmp/devroot/rt || { echo BUILD-FAILED-RETRY-K0; cmake --build build -j 16 -- -k 0 2>&1 | grep -A12 FAILED; false; }" ;;
  cuda_tests) [ -e $S/build.done ] && step cuda_tests 300 "./build/tests/sparkglm_cuda_tests --gtest_output=json:$R/cuda_tests.json" ;;
  *) [ -e $S/build.done ] && [ -f .devroot/step_$s.sh ] && step $s 400 "bash .devroot/step_$s.sh $R" ;;
  esac
done
