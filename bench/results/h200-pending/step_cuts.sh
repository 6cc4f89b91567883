# Written in session 29, not run: the A/B of select-rank.patch and chain-z-in-place.patch, as
# session 29 ran PDL's. Before the call: `git apply` both patches to the tree, then
# `cat select-rank.patch chain-z-in-place.patch > .devroot/cuts.patch` and copy variant.sh and
# this file (as step_cuts.sh) into .devroot/. Run `bash .devroot/dev.sh 570 build cuda_tests cuts`:
# every CUDA test on the patched tree, then the tree less the patches rebuilt in /tmp/base and
# speculation_bench alternated three times (about 480 s on a fresh H100).
R=$1
source .devroot/variant.sh
build_variant /tmp/base cuts.patch -R speculation_bench || exit 1
M=tinyglm/weights/tinyglm-micro-trained-mtp-chain; P=tinyglm/weights/tinyglm-micro-trained/heldout.json
for i in 1 2 3; do for v in cuts=. base=/tmp/base; do
  name=${v%%=*} dir=${v#*=}
  timeout 40 "$dir/build/bench/speculation_bench" --device cuda --model $M --prompts $P --k 0,2,3 \
    --concurrency 1,4 --max-tokens 128 --reps 3 > "$R/cuts-$name-$i.json" 2> "$R/cuts-$name-$i.log"
  echo "$name $i rc=$?"
done; done
