# Session 27: does the chain test's new first run (the last request ending after 3 tokens, so
# graphs are captured on short slices first) catch a real bug? mutation-split-chain.patch turns
# the tree into session 27's first try at a separate chain graph, whose key left out the verify
# step's rows (begin() copies and samples that many rows), with the new test beside it; the
# chain test must fail on that build. Copied into .devroot/ as step_mut.sh (call3.sh).
R=$1
source .devroot/variant.sh
build_variant /tmp/mut mutation-split-chain.patch sparkglm_cuda_tests || exit 1
timeout 200 /tmp/mut/build/tests/sparkglm_cuda_tests --gtest_filter='*ChainsFromInsideTheVerifyStep*' \
  > $R/mut-tests.log 2>&1; echo "mutation tests rc=$? (non-zero expected)"
grep -E "^\[  (PASSED|FAILED)|FAILED  \]|Expected|Which is|position" $R/mut-tests.log | head -30
