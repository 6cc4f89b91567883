# Issue 19 on the H200: speculation on both micro checkpoints, the base and the chain-trained MTP
# module (docs/speculative-decoding.md, "Drafts trained for chains"), same binary, alternated.
R=$1
for m in tinyglm-micro-trained tinyglm-micro-trained-mtp-chain; do
  M=tinyglm/weights/$m
  timeout 150 ./build/bench/speculation_bench --device cuda --model $M --prompts $M/heldout.json \
    --k 0,1,2,3 --concurrency 1,4,8 --max-tokens 128 --reps 3 > $R/spec-$m.json 2> $R/spec-$m.log
  echo "$m rc=$?"
done
