set -u; T0=$(date +%s)
bash .devroot/dev.sh 330 build
bash .devroot/dev.sh $((575 - $(date +%s) + T0)) chtest chbench
cat /tmp/R/chtest.log | grep -E "FAILED|PASSED|chains" | head -20
cat /tmp/R/chbench-summary.txt 2>/dev/null
