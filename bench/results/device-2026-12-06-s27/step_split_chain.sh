# Session 27: the chain's passes as a graph of their own, launched after the verify step's
# (split-chain.patch, which the tree held): HEAD's base rebuilt in /tmp/base with the patch
# reversed, then speculation_bench alternated five times between the two builds (C1, C4; k = 0,
# 2, 3), then one all-prompts run each (--waves 8, C1, k = 0..3). Copied into .devroot/ as
# step_split.sh with variant.sh and the patch beside it (call2.sh).
R=$1
source .devroot/variant.sh
build_variant /tmp/base split-chain.patch -R speculation_bench || exit 1
alternate_bench split-bench split=. base=/tmp/base
M=tinyglm/weights/tinyglm-micro-trained-mtp-chain; P=tinyglm/weights/tinyglm-micro-trained/heldout.json
for v in split=. base=/tmp/base; do
  timeout 60 ${v#*=}/build/bench/speculation_bench --device cuda --model $M --prompts $P --k 0,1,2,3 \
    --concurrency 1 --max-tokens 128 --reps 1 --waves 8 > $R/split-waves8-${v%%=*}.json 2> $R/split-waves8-${v%%=*}.log
  echo "waves8 ${v%%=*} rc=$?"
done
