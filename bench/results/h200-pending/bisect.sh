# Which launch cut breaks k >= 2's output identity (written in session 32, not run: no machine).
# HEAD holds none of the three (reverted in dbeba64); the tree with the fold (/tmp/fold), with the
# fold and the MLA rows (/tmp/fm) and with all three (/tmp/all3), only speculation_bench built,
# alternated three times. Copy this folder's patches into .devroot/ first; then, with carry
# .devroot: `bash .devroot/bisect.sh` (no dev.sh build step needed). A variant whose k >= 2 hashes
# differ from its k = 0 hash holds the race (9 of 20 speculative cells did with all three).
set -u
T0=$(date +%s); R=/tmp/R; mkdir -p $R
trap 'tar czf $OUT/r.tgz -C /tmp R' EXIT
mkdir -p /tmp/devroot && for f in .devroot/*.deb; do dpkg -x $f /tmp/devroot; done
mkdir -p /tmp/devroot/rt && cp -a /tmp/devroot/usr/lib/x86_64-linux-gnu/*.so* /tmp/devroot/rt/ 2>/dev/null
cp -a /tmp/devroot/lib/x86_64-linux-gnu/*.so* /tmp/devroot/rt/ 2>/dev/null
variant() {  # DIR PATCH...
  local d=$1; shift
  rm -rf $d && mkdir -p $d && tar --exclude=./build --exclude=./.devroot --exclude=./.devrun -cf - . | tar -xf - -C $d
  for p in "$@"; do (cd $d && git apply $OLDPWD/.devroot/$p) || { echo "PATCH-FAILED $p"; return 1; }; done
  cmake -S $d -B $d/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DSPARKGLM_TESTS=ON -DCMAKE_CUDA_ARCHITECTURES=90a \
    -DCMAKE_PREFIX_PATH=/tmp/devroot/usr -DCMAKE_EXE_LINKER_FLAGS=-Wl,--disable-new-dtags,-rpath,/tmp/devroot/rt > $R/$(basename $d)-cmake.log 2>&1
  cmake --build $d/build -j 16 --target speculation_bench > $R/$(basename $d)-build.log 2>&1 || { tail -20 $R/$(basename $d)-build.log; return 1; }
  echo "built $d +$(( $(date +%s) - T0 ))s"
}
variant /tmp/fold mhc-fold.patch || exit 1
variant /tmp/fm mhc-fold.patch mla-rows.patch || exit 1
variant /tmp/all3 mhc-fold.patch mla-rows.patch beside.patch || exit 1
M=tinyglm/weights/tinyglm-micro-trained-mtp-chain P=tinyglm/weights/tinyglm-micro-trained/heldout.json
for i in 1 2 3; do for v in fold fm all3; do
  timeout 40 /tmp/$v/build/bench/speculation_bench --device cuda --model $M --prompts $P --k 0,2,3 \
    --concurrency 1,4 --max-tokens 128 --reps 3 > $R/bisect-$v-$i.json 2> $R/bisect-$v-$i.log
  echo "$v $i rc=$? +$(( $(date +%s) - T0 ))s"
done; done
