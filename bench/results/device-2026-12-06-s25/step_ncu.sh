# Session 25: per-kernel device time (ncu, duration only, clocks left alone), C1 k = 3, main and sel.
R=$1
M=tinyglm/weights/tinyglm-micro-trained-mtp-chain; P=tinyglm/weights/tinyglm-micro-trained/heldout.json
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1); echo "ncu=$NCU"
for v in main sel; do
  B=./build/bench/speculation_bench; [ $v = sel ] && B=/tmp/sel/build/bench/speculation_bench
  timeout 40 $NCU --clock-control none --metrics gpu__time_duration.sum --csv --launch-skip 4000 --launch-count 1000 \
    $B --device cuda --model $M --prompts $P --k 3 --concurrency 1 --max-tokens 96 --reps 1 \
    > $R/ncu-$v-k3.csv 2> $R/ncu-$v-k3.log; echo "ncu $v rc=$?"
  gzip -f $R/ncu-$v-k3.csv
done
