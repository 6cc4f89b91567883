R=$1; W=/tmp/pdl
[ -x $W/build/tests/sparkglm_cuda_tests ] || { echo "pdl not built"; bash .devroot/step_pdl_build.sh $R || exit 1; }
timeout 280 $W/build/tests/sparkglm_cuda_tests > $R/pdl-tests.log 2>&1; echo "pdl tests rc=$?"
grep -E "^\[  (PASSED|FAILED)|FAILED  \]" $R/pdl-tests.log | head -20
