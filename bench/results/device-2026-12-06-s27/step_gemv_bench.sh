# After step_gemv_loads.sh: speculation_bench alternated five times between the tree's build and
# the patched one (/tmp/gl), with each drafting step's split (draft_step_time: the host's pieces
# load/plan/launch, its wait, the device span and run_step); then the patched build's kernels at
# k = 2 under ncu. Copied into .devroot/ as step_glbench.sh (next_call.sh).
R=$1
source .devroot/variant.sh
alternate_bench gl-bench head=. gl=/tmp/gl
M=tinyglm/weights/tinyglm-micro-trained-mtp-chain; P=tinyglm/weights/tinyglm-micro-trained/heldout.json
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
timeout 40 $NCU --clock-control none --metrics gpu__time_duration.sum --csv --launch-skip 4000 --launch-count 1000 \
  /tmp/gl/build/bench/speculation_bench --device cuda --model $M --prompts $P --k 2 --concurrency 1 --max-tokens 96 --reps 1 \
  > $R/ncu-gl-k2.csv 2> $R/ncu-gl-k2.log; echo "ncu rc=$?"; gzip -f $R/ncu-gl-k2.csv
