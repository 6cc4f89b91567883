# Session 24: per-kernel device time (ncu, duration only, clocks left alone) of C1 decode (k = 0)
# and C1 verify steps (k = 1, 3) on the chain-trained micro, main build.
R=$1
M=tinyglm/weights/tinyglm-micro-trained-mtp-chain; P=tinyglm/weights/tinyglm-micro-trained/heldout.json
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1); echo "ncu=$NCU"
for k in 3; do
  timeout 70 $NCU --clock-control none --metrics gpu__time_duration.sum --csv --launch-skip 4000 --launch-count 1000 \
    /tmp/vs/build/bench/speculation_bench --device cuda --model $M --prompts $P --k $k --concurrency 1 \
    --max-tokens 96 --reps 1 > $R/ncu-vs-k$k.csv 2> $R/ncu-vs-k$k.log; echo "ncu k=$k rc=$?"
  gzip -f $R/ncu-vs-k$k.csv
done
