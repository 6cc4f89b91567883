# call 3: branch mtp-pass-graphs (its speculation tests, then speculation_bench with main alternated).
set -u; T0=$(date +%s); mkdir -p /tmp/R /tmp/S
bash .devroot/dev.sh 300 build
bash .devroot/dev.sh $((575 - $(date +%s) + T0)) mtp_graphs
tar czf $OUT/results.tgz -C /tmp R; cp /tmp/R/summary.txt $OUT/ 2>/dev/null
