set -u; T0=$(date +%s)
bash .devroot/dev.sh 300 build
bash .devroot/dev.sh $((450 - $(date +%s) + T0)) last
cat /tmp/R/last.log
