# Session 30, call 2: the select test on the radix kernel and the chain tests, then the kernel
# sequence of C1 k = 0 and k = 2 steps (ncu, warm caches), and per-part device time (--profile-steps).
R=$1
./build/tests/sparkglm_cuda_tests --gtest_filter='CudaDsaSelect.*:*Chain*:*Speculation*:*Draft*' \
  > $R/sel-chain-tests.log 2>&1; echo "tests rc=$?"; grep -E "PASSED|FAILED" $R/sel-chain-tests.log | tail -12
M=tinyglm/weights/tinyglm-micro-trained-mtp-chain; P=tinyglm/weights/tinyglm-micro-trained/heldout.json
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1); echo "ncu=$NCU"
for k in 0 2; do
  timeout 60 $NCU --clock-control none --cache-control none --metrics gpu__time_duration.sum --csv \
    --launch-skip 3000 --launch-count 700 ./build/bench/speculation_bench --device cuda --model $M \
    --prompts $P --k $k --concurrency 1 --max-tokens 96 --reps 1 > $R/ncu-k$k.csv 2> $R/ncu-k$k.log
  echo "ncu k=$k rc=$?"; gzip -f $R/ncu-k$k.csv
done
timeout 60 ./build/bench/speculation_bench --device cuda --model $M --prompts $P --k 0,2 \
  --concurrency 1 --max-tokens 128 --reps 2 --profile-steps > $R/spec-prof.json 2> $R/spec-prof.log
echo "prof rc=$?"
cp $R/ncu-k*.csv.gz $R/spec-prof.log $R/sel-chain-tests.log $OUT/
