# Session 25: every CUDA test at HEAD (session 24's mend never ran on a GPU).
R=$1
timeout 280 ./build/tests/sparkglm_cuda_tests > $R/main-tests.log 2>&1; echo "main all rc=$?"
grep -E "^\[  (PASSED|FAILED)|FAILED  \]|tests ran" $R/main-tests.log | head -20
