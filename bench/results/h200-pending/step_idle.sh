# Written in session 28, not run (no device time left): with idle-time.patch applied to the tree
# (git apply), the pipelined step's idle time (DraftStepTimes::idle_seconds, the bench's
# draft_step_time.idle_us). The speculation, served-model and graph CUDA tests, then
# speculation_bench on the first held-out prompt. Run as `bash .devroot/dev.sh 320 build idle`
# with this file copied to .devroot/step_idle.sh.
R=$1
timeout 120 ./build/tests/sparkglm_cuda_tests --gtest_filter='*Speculation*:ServedModels/*:*Graph*' \
  > $R/idle-tests.log 2>&1; echo "tests rc=$?"
grep -E "^\[  (PASSED|FAILED)|FAILED  \]" $R/idle-tests.log | head -20
M=tinyglm/weights/tinyglm-micro-trained-mtp-chain; P=tinyglm/weights/tinyglm-micro-trained/heldout.json
timeout 60 ./build/bench/speculation_bench --device cuda --model $M --prompts $P --k 0,2,3 \
  --concurrency 1,4 --max-tokens 128 --reps 3 > $R/idle-bench.json 2> $R/idle-bench.log; echo "bench rc=$?"
cp $R/idle-bench.json $R/idle-bench.log $OUT/ 2>/dev/null
