# Session 24: every CUDA test, HEAD's build then the patched one.
R=$1
timeout 200 ./build/tests/sparkglm_cuda_tests > $R/all-main-tests.log 2>&1; echo "main all rc=$?"
grep -E "^\[  (PASSED|FAILED)|FAILED  \]|tests ran" $R/all-main-tests.log | head -20
timeout 200 /tmp/vs/build/tests/sparkglm_cuda_tests > $R/all-vs-tests.log 2>&1; echo "vs all rc=$?"
grep -E "^\[  (PASSED|FAILED)|FAILED  \]|tests ran" $R/all-vs-tests.log | head -20
