R=$1; M=$R/wide2; P=tinyglm/weights/tinyglm-micro-trained/heldout.json
[ -f $M/training.json ] || { echo "no $M"; exit 1; }
SPARKGLM_TEST_WIDE_CHECKPOINT=$M timeout 90 ./build/tests/sparkglm_cuda_tests --gtest_filter='*tinyglm_wide*' > $R/wide2-tests.log 2>&1
echo "wide2 tests rc=$?"; grep -E "NMSE|OK|FAILED|Failure|actual" $R/wide2-tests.log | head -40
timeout 150 ./build/sparkglm-qualify quality --device cuda --checkpoint $M --out $R/quality-wide2-cuda \
  > $R/quality-wide2-cuda.log 2>&1; echo "quality rc=$?"; grep -E "mean|quality gate|verifies" $R/quality-wide2-cuda.log
timeout 100 ./build/bench/speculation_bench --device cuda --model $M --prompts $P --k 0,1,2,3 \
  --concurrency 1,4 --max-tokens 128 --reps 3 > $R/spec-wide2.json 2> $R/spec-wide2.log; echo "spec rc=$?"
