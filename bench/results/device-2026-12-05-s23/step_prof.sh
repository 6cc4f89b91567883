# Session 23, call 3 (issues 19 and 15): device time by part of a speculative step (--profile-steps)
# on the chain-trained micro at k = 0, 1, 3 (chains in the step), C1; the tinyglm BF16 decode
# step profile (runner bench).
R=$1
M=tinyglm/weights/tinyglm-micro-trained-mtp-chain; P=tinyglm/weights/tinyglm-micro-trained/heldout.json
timeout 80 ./build/bench/speculation_bench --device cuda --model $M --prompts $P --k 0,1,3 \
  --concurrency 1 --max-tokens 128 --reps 2 --profile-steps > $R/spec-prof.json 2> $R/spec-prof.log
echo "spec prof rc=$?"
timeout 60 ./build/bench/sparkglm-runner-bench --device cuda --preset tinyglm --cells decode_c1 \
  --runs 2 --gpu-memory-utilization 0.5 --profile-steps --out $R/rb-prof-tinyglm-bf16.json > $R/rb-prof.log 2>&1
echo "rb prof rc=$?"
