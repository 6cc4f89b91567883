# Session 23: the CUDA tests of speculation and of the steps around it, chains in the step among them.
R=$1
timeout 300 ./build/tests/sparkglm_cuda_tests --gtest_filter='*Specul*:*StepPipeline*:*Rollback*:*Batch*' \
  > $R/chtest.log 2>&1; echo "chtest rc=$?"
grep -E "^\[  (PASSED|FAILED)|FAILED  \]|\[ chains|\[ drafts" $R/chtest.log | head -40
