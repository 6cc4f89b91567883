# Issue 19: both micro checkpoints alternated, the base's held-out prompts for both (the chain folder has none)
R=$1; P=tinyglm/weights/tinyglm-micro-trained/heldout.json
for i in 1 2; do for m in tinyglm-micro-trained tinyglm-micro-trained-mtp-chain; do
  timeout 150 ./build/bench/speculation_bench --device cuda --model tinyglm/weights/$m --prompts $P \
    --k 0,1,2,3 --concurrency 1,4,8 --max-tokens 128 --reps 3 > $R/spec2-$m-$i.json 2> $R/spec2-$m-$i.log
  echo "$m $i rc=$?"
done; done
