# Session 23, call 5 (issue 19): the committed tree (chains for one-slice steps only): the
# speculation CUDA tests, then chains on/off alternated on the chain-trained micro, C1 and C4.
R=$1
timeout 200 ./build/tests/sparkglm_cuda_tests --gtest_filter='*Specul*' > $R/last-tests.log 2>&1; echo "tests rc=$?"
grep -E "^\[  (PASSED|FAILED)|FAILED  \]|\[ chains" $R/last-tests.log | head -30
P=tinyglm/weights/tinyglm-micro-trained/heldout.json; M=tinyglm/weights/tinyglm-micro-trained-mtp-chain
for i in 1 2 3; do for v in on off; do
  timeout 90 ./build/bench/speculation_bench --device cuda --model $M --prompts $P --k 0,1,2,3 \
    --concurrency 1,4 --max-tokens 128 --reps 3 --chain-in-step $v > $R/last-$v-$i.json 2> $R/last-$v-$i.log
  echo "bench $v $i rc=$?"
done; done
