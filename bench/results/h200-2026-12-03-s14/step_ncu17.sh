# Carried binaries on the H200 (session 14): where a glm-5.3-flash fp4-local decode step (C1, 4
# layers, eager so that every kernel is its own launch) spends device time, kernel by kernel, and
# the full Nsight Compute sections of the quantized MoE and GEMV kernels (issue 15).
set -x
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export SPARKGLM_SOURCE_DIR="$(pwd)"
mkdir -p build && tar xzf .devbins/bins.tgz -C build
R=/tmp/R; mkdir -p $R
T0=$(date +%s)
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
RB="./build/bench/sparkglm-runner-bench --device cuda --preset glm-5.3-flash --num-layers 4 --weight-format fp4-local --cells decode_c1 --decode-steps 3 --warmup-steps 1 --runs 1 --enforce-eager"
K='regex:^(absorb_decode|advance_hist|combine|embed|gather|gemv|gemv_mma|greedy_finish|greedy_split|group|hc_finish|hc_partial|hc_post|layer_norm|output_gate|pool_completed|prepare|quantized_gemv|recurrent|rms_norm|router|shared_swiglu|split|store_bf16|store_keys|sum_splits|swiglu|take|gate_up|down|small|tiled|select|score|pool_scores|sample|linear_f32|mhc)'
timeout 200 $NCU --clock-control none --kernel-name "$K" --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,launch__grid_size,launch__block_size,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active \
  --csv --log-file $R/ncu17-times.csv $RB --out $R/ncu17-rb.json > $R/ncu17-times.log 2>&1
echo "times rc=$? after $(( $(date +%s) - T0 ))s"; wc -l $R/ncu17-times.csv
S="--section SpeedOfLight --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables --section WarpStateStats --section SchedulerStats --section LaunchStats --section Occupancy --section InstructionStats --section SourceCounters"
timeout 150 $NCU --clock-control none $S --kernel-name 'regex:^(gate_up_kernel|down_kernel|quantized_gemv_kernel)' --launch-skip 4 --launch-count 6 --log-file $R/ncu17-sections.txt $RB --out $R/ncu17-rb2.json > $R/ncu17-sections.log 2>&1
echo "sections rc=$? after $(( $(date +%s) - T0 ))s"
tar czf $OUT/r.tgz -C /tmp R
