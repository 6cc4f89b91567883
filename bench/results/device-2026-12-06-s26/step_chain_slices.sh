# Chains in verify steps of several slices (session 25's speculation_bench --chain-slices N) against
# the engine's one-slice rule, alternated three times in one build, C4 and C8, chain-trained micro.
R=$1
M=tinyglm/weights/tinyglm-micro-trained-mtp-chain; P=tinyglm/weights/tinyglm-micro-trained/heldout.json
for i in 1 2 3; do for n in 1 8; do
  timeout 40 ./build/bench/speculation_bench --device cuda --model $M --prompts $P --k 0,2,3 \
    --concurrency 4,8 --max-tokens 128 --reps 3 --chain-slices $n > $R/cs-$n-$i.json 2> $R/cs-$n-$i.log
  echo "chain-slices $n run $i rc=$?"
done; done
