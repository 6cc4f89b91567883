# Session 25: every CUDA test on the build with both patches.
R=$1
timeout 280 /tmp/both/build/tests/sparkglm_cuda_tests > $R/both-tests.log 2>&1; echo "both all rc=$?"
grep -E "^\[  (PASSED|FAILED)|FAILED  \]|tests ran" $R/both-tests.log | head -20
