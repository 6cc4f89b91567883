# Session 25, call 3: kernels of the candidate's steps, C1 k = 0 and k = 2 (ncu, durations only).
R=$1
M=tinyglm/weights/tinyglm-micro-trained-mtp-chain; P=tinyglm/weights/tinyglm-micro-trained/heldout.json
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
for k in 0 2; do
  timeout 40 $NCU --clock-control none --metrics gpu__time_duration.sum --csv --launch-skip 4000 --launch-count 1000 \
    ./build/bench/speculation_bench --device cuda --model $M --prompts $P --k $k --concurrency 1 --max-tokens 96 --reps 1 \
    > $R/ncu-group-k$k.csv 2> $R/ncu-group-k$k.log; echo "ncu k=$k rc=$?"; gzip -f $R/ncu-group-k$k.csv
done
