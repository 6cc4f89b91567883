# call 2: the trained tinyglm-wide through the CUDA backend (quality gate, then speculation_bench k = 0..3
# at C1/C4/C8), on the machine call 1 left warm (its build and /tmp/R/wide).
set -u; T0=$(date +%s); mkdir -p /tmp/R /tmp/S
bash .devroot/dev.sh 300 build
bash .devroot/dev.sh $((575 - $(date +%s) + T0)) wide_serve
tar czf $OUT/results.tgz -C /tmp R; cp /tmp/R/summary.txt $OUT/ 2>/dev/null
