# Session 26, calls 3 and 4 (4: with run_us, and the new test's checks kept to steps that drafted
# in the step): the tree's own build (ci/build.sh), every CUDA test, then speculation_bench three
# times at C1, C4 and C8 (chains in steps of up to 8 slices, the new default) with the runner's
# split of each drafting step (draft_step_time), once over all eight held-out prompts at C1, and
# (call 4) the kernels of a decode step under ncu.
R=$1
timeout 200 ./build/tests/sparkglm_cuda_tests > $R/cuda-tests.log 2>&1; echo "cuda tests rc=$?"
grep -E "^\[  (PASSED|FAILED)|FAILED  \]" $R/cuda-tests.log | head -20
M=tinyglm/weights/tinyglm-micro-trained-mtp-chain; P=tinyglm/weights/tinyglm-micro-trained/heldout.json
for i in 1 2 3; do
  timeout 60 ./build/bench/speculation_bench --device cuda --model $M --prompts $P --k 0,2,3 \
    --concurrency 1,4,8 --max-tokens 128 --reps 3 > $R/dt-$i.json 2> $R/dt-$i.log; echo "bench $i rc=$?"
done
timeout 60 ./build/bench/speculation_bench --device cuda --model $M --prompts $P --k 0,1,2,3 \
  --concurrency 1 --max-tokens 128 --reps 1 --waves 8 > $R/dt-waves8.json 2> $R/dt-waves8.log; echo "waves8 rc=$?"
[ -e $R/ncu-k0.csv.gz ] && exit 0
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
timeout 40 $NCU --clock-control none --metrics gpu__time_duration.sum --csv --launch-skip 4000 --launch-count 500 \
  ./build/bench/speculation_bench --device cuda --model $M --prompts $P --k 0 --concurrency 1 --max-tokens 96 --reps 1 \
  > $R/ncu-k0.csv 2> $R/ncu-k0.log; echo "ncu rc=$?"; gzip -f $R/ncu-k0.csv
ls -d /usr/local/cuda*/nsight-systems* /opt/nvidia/nsight-systems* /usr/local/cuda/bin/nsys 2>&1 | head -3
