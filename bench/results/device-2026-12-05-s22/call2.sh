# session 22, call 2: tinyglm-wide trained again for longer (v2) in the background; the build; the
# CUDA backend's quality gate on call 1's wide model (v1, carried in .devroot/wide: does the GPU give
# the CPU's held-out NLL at the wide geometry?); branch mtp-pass-graphs built and its tests run.
set -u; T0=$(date +%s); mkdir -p /tmp/R /tmp/S
export PYTHONUNBUFFERED=1
( timeout 500 python3 tinyglm/train/train_wide.py --seed 1 --steps auto --time-budget-s 420 --eval-max-s 15 \
    --out /tmp/R/wide2 > /tmp/R/train-wide2.log 2>&1; echo "wide2 rc=$?" >> /tmp/R/train-wide2.log ) &
bash .devroot/dev.sh 300 build
bash .devroot/dev.sh $((520 - $(date +%s) + T0)) mg_build
while ! grep -q "wide2 rc=" /tmp/R/train-wide2.log 2>/dev/null && [ $(( $(date +%s) - T0 )) -lt 525 ]; do sleep 5; done
tail -4 /tmp/R/train-wide2.log
tar czf $OUT/results.tgz -C /tmp R; cp /tmp/R/summary.txt $OUT/ 2>/dev/null
