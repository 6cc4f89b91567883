# Session 23, call 4 (issue 19): drafts chained in the verify step against the drafter's own passes,
# the committed tree built from source; alternated, 3 runs each, C1/C4/C8, k = 0..3, on both
# trained micro checkpoints; then the step profile of k = 2 and 3 with chains off.
R=$1
P=tinyglm/weights/tinyglm-micro-trained/heldout.json
for m in tinyglm-micro-trained-mtp-chain tinyglm-micro-trained; do
  M=tinyglm/weights/$m; n=3; [ $m = tinyglm-micro-trained ] && n=2
  for i in $(seq 1 $n); do for v in on off; do
    timeout 120 ./build/bench/speculation_bench --device cuda --model $M --prompts $P --k 0,1,2,3 \
      --concurrency 1,4,8 --max-tokens 128 --reps 3 --chain-in-step $v > $R/final-$m-$v-$i.json 2> $R/final-$m-$v-$i.log
    echo "$m $v $i rc=$?"
  done; done
done
M=tinyglm/weights/tinyglm-micro-trained-mtp-chain
timeout 60 ./build/bench/speculation_bench --device cuda --model $M --prompts $P --k 2,3 \
  --concurrency 1 --max-tokens 128 --reps 2 --chain-in-step off --profile-steps > $R/final-prof-off.json 2> $R/final-prof-off.log
echo "prof off rc=$?"
