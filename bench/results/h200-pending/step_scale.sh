# Written in session 33 (not run: no machine): the scale test of canonical verify on HEAD (no launch cuts); it should pass.
R=$1
./build/tests/sparkglm_cuda_tests --gtest_filter='CudaSpeculation.*' > $R/scale-head.log 2>&1
echo "HEAD CudaSpeculation.* rc=$?"; grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ms total" $R/scale-head.log | head -12
