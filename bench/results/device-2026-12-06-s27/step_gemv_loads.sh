# gemv-rows-loads.patch (session 26, compiled, not run): the CUDA-core GEMV of 2-8 rows requests
# every x row's chunk before using any (no branch between the rows), where today it waits one
# memory latency a row. Builds the patched tree in /tmp/gl (its tests: step_gemv_tests.sh).
# Copied into .devroot/ as step_gl.sh, with variant.sh and the patch beside it (next_call.sh).
R=$1
source .devroot/variant.sh
build_variant /tmp/gl gemv-rows-loads.patch sparkglm_cuda_tests speculation_bench
