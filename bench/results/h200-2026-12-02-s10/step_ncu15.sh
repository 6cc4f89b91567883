set -x
R=$1
# Nsight Compute on the FP4-Local kernels: why they sit under their HBM floor (stall reasons,
# memory throughput, occupancy), for the next kernel iteration (issue 15).
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
echo "ncu: $NCU"
[ -n "$NCU" ] || exit 3
S="--section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section LaunchStats --section Occupancy --section ComputeWorkloadAnalysis"
timeout 150 $NCU $S --kernel-name regex:'quantized_gemv_kernel|gate_up_kernel|down_kernel' --launch-skip 30 --launch-count 6 ./build/bench/sparkglm-runner-bench --device cuda --preset glm-5.3-flash --num-layers 4 --weight-format fp4-local --cells decode_c1 --decode-steps 3 --warmup-steps 1 --out $R/ncu-rb.json > $R/ncu-glm4-fp4-decode.txt 2>&1
timeout 120 $NCU $S --kernel-name regex:'quantized_gemv_kernel' --launch-count 4 ./build/bench/cuda/g1_operators --only quantized --runs 25 --out $R/ncu-g1.json > $R/ncu-g1-quantized.txt 2>&1
tail -5 $R/ncu-*.txt
