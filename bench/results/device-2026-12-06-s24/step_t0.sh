# Session 24: the CUDA tests the change touches at HEAD (the sparse decode rows' pool scores in one launch).
R=$1
timeout 150 ./build/tests/sparkglm_cuda_tests --gtest_filter='*Dsa*:*Norms*:*Specul*:*CudaModelRunner*:*Verify*:*Batch*:*Mtp*' > $R/t0-tests.log 2>&1; echo "tests rc=$?"
grep -E "^\[  (PASSED|FAILED)|FAILED  \]|tests ran" $R/t0-tests.log | head -30
