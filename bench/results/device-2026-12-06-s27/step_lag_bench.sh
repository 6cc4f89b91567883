# Session 27: HEAD's tree with the lag timing (DraftStepTimes::lag, the graph's first node) and
# the CUDA engine faults: speculation_bench three times (C1, C4; k = 0, 2, 3) with each drafting
# step's split, then once over all eight prompts (--waves 8, C1, k = 0..3). Copied into .devroot/
# as step_lagbench.sh (call3.sh).
R=$1
M=tinyglm/weights/tinyglm-micro-trained-mtp-chain; P=tinyglm/weights/tinyglm-micro-trained/heldout.json
for i in 1 2 3; do
  timeout 40 ./build/bench/speculation_bench --device cuda --model $M --prompts $P --k 0,2,3 \
    --concurrency 1,4 --max-tokens 128 --reps 3 > $R/lag-bench-$i.json 2> $R/lag-bench-$i.log
  echo "run $i rc=$?"
done
timeout 60 ./build/bench/speculation_bench --device cuda --model $M --prompts $P --k 0,1,2,3 \
  --concurrency 1 --max-tokens 128 --reps 1 --waves 8 > $R/lag-waves8.json 2> $R/lag-waves8.log
echo "waves8 rc=$?"
