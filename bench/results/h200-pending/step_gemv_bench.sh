# After step_gemv_loads.sh: speculation_bench alternated five times between the tree's build and
# the patched one (/tmp/gl), C1 and C4, k = 0, 2, 3, with each drafting step's split
# (draft_step_time: host pieces load/plan/launch, wait, device, run_step); then the patched build's
# kernels at k = 2 under ncu. Copy into .devroot/ as step_glbench.sh.
R=$1; W=/tmp/gl
M=tinyglm/weights/tinyglm-micro-trained-mtp-chain; P=tinyglm/weights/tinyglm-micro-trained/heldout.json
for i in 1 2 3 4 5; do for v in head gl; do
  B=./build/bench/speculation_bench; [ $v = gl ] && B=$W/build/bench/speculation_bench
  timeout 40 $B --device cuda --model $M --prompts $P --k 0,2,3 --concurrency 1,4 --max-tokens 128 \
    --reps 3 > $R/gl-bench-$v-$i.json 2> $R/gl-bench-$v-$i.log; echo "$v $i rc=$?"
done; done
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
timeout 40 $NCU --clock-control none --metrics gpu__time_duration.sum --csv --launch-skip 4000 --launch-count 1000 \
  $W/build/bench/speculation_bench --device cuda --model $M --prompts $P --k 2 --concurrency 1 --max-tokens 96 --reps 1 \
  > $R/ncu-gl-k2.csv 2> $R/ncu-gl-k2.log; echo "ncu rc=$?"; gzip -f $R/ncu-gl-k2.csv
