# Session 25, call 3: speculation_bench, baseline (HEAD) against the grouped GEMV, alternated.
R=$1
for i in $(seq 1 100); do [ -e /tmp/base.built ] && break; sleep 2; done; cat $R/base-status.txt
M=tinyglm/weights/tinyglm-micro-trained-mtp-chain; P=tinyglm/weights/tinyglm-micro-trained/heldout.json
for i in 1 2 3 4 5; do for v in base group; do
  B=./build/bench/speculation_bench; [ $v = base ] && B=/tmp/base/build/bench/speculation_bench
  [ -x $B ] || continue
  timeout 40 $B --device cuda --model $M --prompts $P --k 0,1,2,3 --concurrency 1,4 --max-tokens 128 \
    --reps 3 > $R/ab-$v-$i.json 2> $R/ab-$v-$i.log; echo "$v $i rc=$?"
done; done
for i in 1 2; do for v in base group; do
  B=./build/bench/speculation_bench; [ $v = base ] && B=/tmp/base/build/bench/speculation_bench
  timeout 40 $B --device cuda --model $M --prompts $P --k 0,1,2,3 --concurrency 1 --waves 8 --max-tokens 128 \
    --reps 3 > $R/waves-$v-$i.json 2> $R/waves-$v-$i.log; echo "waves $v $i rc=$?"
done; done
