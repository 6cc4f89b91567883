# Session 24: speculation_bench, main against the patch (kda-verify-slices), alternated, chain-trained micro.
R=$1; W=/tmp/vs
[ -x $W/build/bench/speculation_bench ] || { echo "no vs build"; exit 1; }
M=tinyglm/weights/tinyglm-micro-trained-mtp-chain; P=tinyglm/weights/tinyglm-micro-trained/heldout.json
for i in 1 2 3; do for v in main vs; do
  B=./build/bench/speculation_bench; [ $v = vs ] && B=$W/build/bench/speculation_bench
  timeout 45 $B --device cuda --model $M --prompts $P --k 0,1,2,3 --concurrency 1,4 --max-tokens 128 \
    --reps 3 > $R/vs-bench2-$v-$i.json 2> $R/vs-bench2-$v-$i.log; echo "$v $i rc=$?"
done; done
