# Written in session 33 (not run: no machine): the committed distilled MTP module on the GPU, G2's cells (--waves 8), two runs.
R=$1
M=tinyglm/weights/tinyglm-micro-trained-mtp-distill P=tinyglm/weights/tinyglm-micro-trained/heldout.json
for i in 1 2; do
  timeout 120 ./build/bench/speculation_bench --device cuda --model $M --prompts $P --k 0,2,3 \
    --concurrency 1,4 --waves 8 --max-tokens 128 --reps 3 > $R/distill-$i.json 2> $R/distill-$i.log
  echo "distill $i rc=$?"
done
