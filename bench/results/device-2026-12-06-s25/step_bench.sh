# Session 25: speculation_bench, main / sel / both alternated 3 times, chain-trained micro, one prompt
# per C1 request (as sessions 23-24) and then 8 waves at C1 (every held-out prompt).
R=$1
M=tinyglm/weights/tinyglm-micro-trained-mtp-chain; P=tinyglm/weights/tinyglm-micro-trained/heldout.json
bin() { [ $1 = main ] && echo ./build/bench/speculation_bench || echo /tmp/$1/build/bench/speculation_bench; }
for i in 1 2 3; do for v in main sel both; do
  B=$(bin $v); [ -x $B ] || continue
  timeout 40 $B --device cuda --model $M --prompts $P --k 0,1,2,3 --concurrency 1,4 --max-tokens 128 \
    --reps 3 > $R/bench-$v-$i.json 2> $R/bench-$v-$i.log; echo "$v $i rc=$?"
done; done
for v in main sel both; do
  B=$(bin $v); [ -x $B ] || continue
  timeout 40 $B --device cuda --model $M --prompts $P --k 0,1,2,3 --concurrency 1 --waves 8 --max-tokens 128 \
    --reps 3 > $R/waves-$v.json 2> $R/waves-$v.log; echo "waves $v rc=$?"
done
