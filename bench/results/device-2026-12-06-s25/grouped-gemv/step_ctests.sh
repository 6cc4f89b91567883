# Session 25, call 3: every CUDA test on the candidate (the grouped GEMV), the new test first.
R=$1
./build/tests/sparkglm_cuda_tests --gtest_filter='*GroupedGemv*:*Gemv*' 2>&1 | grep -E "^\[  (PASSED|FAILED)|FAILED  \]|OK \]" | head
timeout 280 ./build/tests/sparkglm_cuda_tests > $R/cand-tests.log 2>&1; echo "cand all rc=$?"
grep -E "^\[  (PASSED|FAILED)|FAILED  \]|tests ran" $R/cand-tests.log | head -20
