set -u; T0=$(date +%s)
bash .devroot/dev.sh 300 build
bash .devroot/dev.sh $((580 - $(date +%s) + T0)) prof cuda_tests
grep -E "^\[  (PASSED|FAILED)|FAILED  \]" /tmp/R/cuda_tests.log | head; tail -3 /tmp/R/cuda_tests.log
