R=$1; W=/tmp/mg
[ -x $W/build/bench/speculation_bench ] || { echo "no mg build"; exit 1; }
M=tinyglm/weights/tinyglm-micro-trained-mtp-chain; P=tinyglm/weights/tinyglm-micro-trained/heldout.json
for i in 1 2; do for v in main mg; do
  B=./build/bench/speculation_bench; [ $v = mg ] && B=$W/build/bench/speculation_bench
  timeout 50 $B --device cuda --model $M --prompts $P --k 0,1,2,3 --concurrency 1,4 --max-tokens 128 \
    --reps 3 > $R/spec-mg-$v-$i.json 2> $R/spec-mg-$v-$i.log; echo "$v $i rc=$?"
done; done
