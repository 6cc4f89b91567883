# Session 34, call 3: the tree holds the fold and MLA-row cuts (innocent in call 1) and the MTP
# module over prompt rows inside their step (StepSampling::mtp_next). (1) every CUDA test but the
# quantized-operator suites, while two variants build beside it: the base (HEAD, the tree with
# tree.patch reversed) and the beside cut on top of the tree with experiment switches; (2) the
# distilled micro at G2's cells (--waves 8), tree vs base alternated, three runs each, and the
# runner bench's tinyglm bf16 decode cells; (3) the scale test in the beside variant per switch.
R=$1
source .devroot/variant.sh
build_multi() { # DIR TARGETS PATCH...
  local d=$1 targets=$2; shift 2
  rm -rf $d && mkdir -p $d && tar --exclude=./build --exclude=./.devroot --exclude=./.devrun -cf - . | tar -xf - -C $d
  for p in "$@"; do (cd $d && git apply $OLDPWD/.devroot/$p) || { echo "PATCH-FAILED $p"; return 1; }; done
  cmake -S $d -B $d/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DSPARKGLM_TESTS=ON -DCMAKE_CUDA_ARCHITECTURES=90a \
    -DCMAKE_PREFIX_PATH=/tmp/devroot/usr -DCMAKE_EXE_LINKER_FLAGS=-Wl,--disable-new-dtags,-rpath,/tmp/devroot/rt > $R/$(basename $d)-cmake.log 2>&1
  cmake --build $d/build -j 8 --target $targets > $R/$(basename $d)-build.log 2>&1 || { tail -20 $R/$(basename $d)-build.log; return 1; }
}
T0=$(date +%s); el() { echo "+$(( $(date +%s) - T0 ))s"; }
(build_variant /tmp/base tree.patch -R speculation_bench sparkglm-runner-bench; echo "base built rc=$? $(el)") > $R/base-bg.log 2>&1 &
(build_multi /tmp/bx "speculation_bench" beside.patch beside-exp.patch; echo "bx built rc=$? $(el)") > $R/bx-bg.log 2>&1 &
./build/tests/sparkglm_cuda_tests --gtest_filter='*Speculation*:*Mhc*:*LatentStore*:*Norms*:*Runner*:*Prefill*:*Graph*:*Batch*' \
  --gtest_output=json:$R/ftests.json > $R/ftests.log 2>&1
echo "tree tests rc=$? $(el)"; grep -E "^\[  (PASSED|FAILED|SKIPPED) +\]|tests ran|failed:" $R/ftests.log | head -14
wait; cat $R/base-bg.log $R/bx-bg.log
M=tinyglm/weights/tinyglm-micro-trained-mtp-distill P=tinyglm/weights/tinyglm-micro-trained/heldout.json
for i in 1 2; do for v in tree=. base=/tmp/base; do n=${v%%=*} d=${v#*=}
  timeout 60 $d/build/bench/speculation_bench --device cuda --model $M --prompts $P --k 0,2,3 --concurrency 1,4 \
    --waves 8 --max-tokens 128 --reps 3 > $R/ab-$n-$i.json 2> $R/ab-$n-$i.log; echo "ab $n $i rc=$? $(el)"
done; done
for cfg in none both; do
  case $cfg in none) e="";; both) e="BESIDE_PLAIN_SIDE=1 BESIDE_PLAIN_COMBINE=1";; esac
  env $e timeout 60 /tmp/bx/build/bench/speculation_bench --device cuda --model $M --prompts $P --k 0,2,3 --concurrency 1,4 \
    --waves 8 --max-tokens 128 --reps 3 > $R/bx-$cfg.json 2> $R/bx-$cfg.log
  echo "bx bench $cfg rc=$? $(el)"; grep -v '^{' $R/bx-$cfg.log | head -3 | cut -c1-400
done
for i in 1; do for v in tree=. base=/tmp/base; do n=${v%%=*} d=${v#*=}
  timeout 60 $d/build/bench/sparkglm-runner-bench --device cuda --preset tinyglm --weight-format bf16 \
    --cells decode_c1,decode_c4,decode_c8 --runs 2 --max-seconds 50 --out $R/rb-$n-$i.json > $R/rb-$n-$i.log 2>&1
  echo "rb $n $i rc=$? $(el)"
done; done
cp $R/ab-*.json $R/rb-*.json $OUT/ 2>/dev/null
