# Session 31, call 2 (warm, after step_all.sh): the tree less beside.patch (/tmp/nb: the fold and
# the MLA rows) and less beside.patch and mla-rows.patch (/tmp/fold: the fold alone), each built,
# and speculation_bench alternated three times over the three.
R=$1
source .devroot/variant.sh
build_variant /tmp/nb beside.patch -R speculation_bench || exit 1
rm -rf /tmp/fold && cp -a /tmp/nb /tmp/fold && rm -rf /tmp/fold/build
(cd /tmp/fold && git apply -R "$OLDPWD/.devroot/mla-rows.patch") || { echo PATCH-FAILED mla-rows; exit 1; }
cmake -S /tmp/fold -B /tmp/fold/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DSPARKGLM_TESTS=ON \
  -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_PREFIX_PATH=/tmp/devroot/usr \
  -DCMAKE_EXE_LINKER_FLAGS=-Wl,--disable-new-dtags,-rpath,/tmp/devroot/rt > $R/fold-cmake.log 2>&1
cmake --build /tmp/fold/build -j 16 --target speculation_bench > $R/fold-build.log 2>&1 || { tail -30 $R/fold-build.log; exit 1; }
M=tinyglm/weights/tinyglm-micro-trained-mtp-chain P=tinyglm/weights/tinyglm-micro-trained/heldout.json
for i in 1 2 3; do for v in all=. nb=/tmp/nb fold=/tmp/fold; do
  name=${v%%=*} dir=${v#*=}
  timeout 40 "$dir/build/bench/speculation_bench" --device cuda --model $M --prompts $P --k 0,2,3 \
    --concurrency 1,4 --max-tokens 128 --reps 3 > "$R/split-bench-$name-$i.json" 2> "$R/split-bench-$name-$i.log"
  echo "$name $i rc=$?"
done; done
