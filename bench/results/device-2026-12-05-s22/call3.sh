# session 22, call 3 (the machine call 2 left warm): mtp-pass-graphs against main on the chain
# checkpoint, alternated; then the longer-trained wide model (v2) through the CUDA quality gate and
# speculation_bench.
set -u; T0=$(date +%s); mkdir -p /tmp/R /tmp/S
bash .devroot/dev.sh 300 build
bash .devroot/dev.sh $((480 - $(date +%s) + T0)) wide2_serve mg_bench
tar czf $OUT/results.tgz -C /tmp R; cp /tmp/R/summary.txt $OUT/ 2>/dev/null
