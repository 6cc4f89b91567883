# Session 29, last call: the two pending verify-step patches applied to the tree; the select,
# speculation and served-model CUDA tests, then one speculation_bench run (no A/B: no time).
R=$1
timeout 100 ./build/tests/sparkglm_cuda_tests --gtest_filter='CudaDsaSelect.*:*Speculation*:*Chain*:ServedModels/*Sparse*:*Graph*' > $R/ct-tests.log 2>&1
echo "tests rc=$?"; grep -E "^\[  (PASSED|FAILED)|FAILED  \]|tests ran" $R/ct-tests.log | head -20
M=tinyglm/weights/tinyglm-micro-trained-mtp-chain; P=tinyglm/weights/tinyglm-micro-trained/heldout.json
timeout 40 ./build/bench/speculation_bench --device cuda --model $M --prompts $P --k 0,2,3 \
  --concurrency 1,4 --max-tokens 128 --reps 3 > $R/ct-bench.json 2> $R/ct-bench.log; echo "bench rc=$?"
cp $R/ct-tests.log $R/ct-bench.json $OUT/ 2>/dev/null
