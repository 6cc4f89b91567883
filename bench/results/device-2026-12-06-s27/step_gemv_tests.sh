# After step_gemv_loads.sh: every CUDA test on the patched build (/tmp/gl). Copied into .devroot/
# as step_gltests.sh (next_call.sh).
R=$1
[ -x /tmp/gl/build/tests/sparkglm_cuda_tests ] || { echo "gl not built"; exit 1; }
timeout 380 /tmp/gl/build/tests/sparkglm_cuda_tests > $R/gl-tests.log 2>&1; echo "gl all rc=$?"
grep -E "^\[  (PASSED|FAILED)|FAILED  \]" $R/gl-tests.log | head -20
