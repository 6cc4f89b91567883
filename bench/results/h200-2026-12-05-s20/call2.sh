# call 2: speculation on both micro checkpoints (issue 19), then the PDL branch's CUDA tests (issue 15)
set -u; T0=$(date +%s)
bash .devroot/dev.sh 240 build
[ -e /tmp/S/train.started ] || echo "fresh machine: no training this call" >> /tmp/R/summary.txt
bash .devroot/dev.sh $((330 - $(date +%s) + T0)) spec
[ -e /tmp/S/pdl_build.done ] || JOBS=16 bash .devroot/step_pdl_build.sh /tmp/R
bash .devroot/dev.sh $((580 - $(date +%s) + T0)) pdl_tests quality
