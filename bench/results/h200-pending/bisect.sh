# Which launch cut breaks k >= 2's output identity (written in session 32, rewritten in session 33;
# not run yet: neither session got a machine for it). HEAD holds none of the three (reverted in
# dbeba64). Variants: the fold alone (/tmp/fold), the shared expert beside alone (/tmp/beside), the
# fold and the MLA rows (/tmp/fm; mla-rows.patch needs the fold's rms_row.cuh); only
# speculation_bench built in each, one run as each is built (a call cut short still says
# something), then two more each, on the chain-trained micro; then the scale test
# (CudaSpeculation.*) built and run in the first variant whose k >= 2 hashes differ from its k = 0
# hash: it must fail there. Copy this folder's patches and this file into .devroot/ (with the debs
# and boost-subset.tar.xz); the call, no full build needed (about 280 s on an H100):
#   mkdir -p /tmp/devroot /tmp/R && for f in .devroot/*.deb; do dpkg -x $f /tmp/devroot; done &&
#   tar xJf .devroot/boost-subset.tar.xz -C /tmp/devroot && mkdir -p /tmp/devroot/rt &&
#   cp -a /tmp/devroot/usr/lib/x86_64-linux-gnu/*.so* /tmp/devroot/lib/x86_64-linux-gnu/*.so* /tmp/devroot/rt/;
#   bash .devroot/bisect.sh /tmp/R > /tmp/R/bisect.log 2>&1; tar czf $OUT/r.tgz -C /tmp R
R=$1; T0=$(date +%s)
build_variant_multi() { # DIR TARGETS PATCH...
  local d=$1 targets=$2; shift 2
  rm -rf $d && mkdir -p $d && tar --exclude=./build --exclude=./.devroot --exclude=./.devrun -cf - . | tar -xf - -C $d
  for p in "$@"; do (cd $d && git apply $OLDPWD/.devroot/$p) || { echo "PATCH-FAILED $p"; return 1; }; done
  cmake -S $d -B $d/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DSPARKGLM_TESTS=ON -DCMAKE_CUDA_ARCHITECTURES=90a \
    -DCMAKE_PREFIX_PATH=/tmp/devroot/usr -DCMAKE_EXE_LINKER_FLAGS=-Wl,--disable-new-dtags,-rpath,/tmp/devroot/rt > $R/$(basename $d)-cmake.log 2>&1
  cmake --build $d/build -j 16 --target $targets > $R/$(basename $d)-build.log 2>&1 || { tail -20 $R/$(basename $d)-build.log; return 1; }
  echo "built $d +$(( $(date +%s) - T0 ))s"
}
M=tinyglm/weights/tinyglm-micro-trained-mtp-chain P=tinyglm/weights/tinyglm-micro-trained/heldout.json
racing=""
bench() { # VARIANT RUN
  local v=$1 i=$2
  timeout 40 /tmp/$v/build/bench/speculation_bench --device cuda --model $M --prompts $P --k 0,2,3 \
    --concurrency 1,4 --max-tokens 128 --reps 3 > $R/bisect-$v-$i.json 2> $R/bisect-$v-$i.log
  rc=$?
  verdict=$(python3 -c "
import json; d=json.load(open('$R/bisect-$v-$i.json')); c=d['cells']
base={x['concurrency']:x['output_sha256'] for x in c if x['k']==0}
bad=['c%dk%d'%(x['concurrency'],x['k']) for x in c if x['output_sha256']!=base[x['concurrency']]]
print('DIFFER '+' '.join(bad) if bad else 'same')" 2>&1 | tail -1)
  echo "$v $i rc=$rc $verdict +$(( $(date +%s) - T0 ))s"
  case $verdict in DIFFER*) [ -z "$racing" ] && racing=$v;; esac
}
# One run as each variant is built (a call cut short still says something), then two more each.
build_variant_multi /tmp/fold speculation_bench mhc-fold.patch && bench fold 1
build_variant_multi /tmp/beside speculation_bench beside.patch && bench beside 1
build_variant_multi /tmp/fm speculation_bench mhc-fold.patch mla-rows.patch && bench fm 1
for i in 2 3; do for v in fold beside fm; do [ -x /tmp/$v/build/bench/speculation_bench ] && bench $v $i; done; done
[ -z "$racing" ] && { echo "no variant raced"; exit 0; }
cmake --build /tmp/$racing/build -j 16 --target sparkglm_cuda_tests > $R/$racing-tests-build.log 2>&1
(cd /tmp/$racing && ./build/tests/sparkglm_cuda_tests --gtest_filter='CudaSpeculation.*' > $R/scale-$racing.log 2>&1)
echo "$racing CudaSpeculation.* rc=$? (nonzero: the scale test catches the race) +$(( $(date +%s) - T0 ))s"
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]" $R/scale-$racing.log | head -12
