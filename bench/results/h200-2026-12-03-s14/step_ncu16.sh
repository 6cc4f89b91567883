set -x
R=$1
# Where a glm-5.3-flash fp4-local decode step (C1, 4 layers) spends its device time, kernel by
# kernel (one ncu pass each: duration and DRAM throughput), then the full sections for the MoE
# expert kernels (issue 15: the quantized MoE is 55 % of the step).
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
echo "ncu: $NCU"; [ -n "$NCU" ] || exit 3
RB="./build/bench/sparkglm-runner-bench --device cuda --preset glm-5.3-flash --num-layers 4 --weight-format fp4-local --cells decode_c1 --decode-steps 3 --warmup-steps 2"
timeout 60 $RB --out $R/ncu16-plain.json > $R/ncu16-plain.txt 2>&1
timeout 150 $NCU --clock-control none --metrics gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum,launch__grid_size,launch__block_size,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active \
  --csv --page raw $RB --out $R/ncu16-rb.json > $R/ncu16-times.csv 2> $R/ncu16-times.err
echo "times rc=$?"; wc -l $R/ncu16-times.csv
S="--section SpeedOfLight --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables --section WarpStateStats --section SchedulerStats --section LaunchStats --section Occupancy --section InstructionStats"
timeout 150 $NCU --clock-control none $S --kernel-name regex:'gate_up_kernel|down_kernel' --launch-skip 40 --launch-count 4 $RB --out $R/ncu16-rb2.json > $R/ncu16-moe.txt 2>&1
echo "moe rc=$?"
