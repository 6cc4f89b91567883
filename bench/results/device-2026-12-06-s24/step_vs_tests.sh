# Session 24: the patched build's verify-bits, rollback, chain and KDA tests.
R=$1; W=/tmp/vs
[ -x $W/build/tests/sparkglm_cuda_tests ] || { echo "no vs build"; exit 1; }
timeout 150 $W/build/tests/sparkglm_cuda_tests --gtest_filter='*Verify*:*Rollback*:*Specul*:*Kda*:*Batch*' > $R/vs-key-tests.log 2>&1; echo "key tests rc=$?"
grep -E "^\[  (PASSED|FAILED)|FAILED  \]|tests ran" $R/vs-key-tests.log | head -30
