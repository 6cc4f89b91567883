# call 3: speculation on both checkpoints (issue 19); main and the PDL branch's runner bench alternated (issue 15)
set -u; T0=$(date +%s); mkdir -p /tmp/R /tmp/S
[ -e /tmp/S/pdl_build.done ] || ( JOBS=8 bash .devroot/step_pdl_build.sh /tmp/R > /tmp/R/pdl-build-step.log 2>&1 && touch /tmp/S/pdl_build.done ) &
bash .devroot/dev.sh 300 build
wait
bash .devroot/dev.sh $((575 - $(date +%s) + T0)) spec2 pdl_bench
