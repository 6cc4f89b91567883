# call 1 (session 21's plan): tinyglm-wide trained on the GPU beside the build from source, then every
# CUDA test (tinyglm-wide with dummy weights is now a served model of the runner tests); the trained
# model comes back in wide.tgz. Copy dev.sh and the step_*.sh here into .devroot/ first.
set -u; T0=$(date +%s); mkdir -p /tmp/R /tmp/S
python3 -c 'import torch; print(torch.__version__, torch.cuda.get_device_name())' > /tmp/R/torch.txt 2>&1
if [ ! -e /tmp/S/train_wide.started ]; then touch /tmp/S/train_wide.started
( timeout 480 bash .devroot/step_train_wide.sh /tmp/R > /tmp/R/train-wide.out 2>&1; echo "wide step rc=$?" >> /tmp/R/train-wide.out ) &
fi
bash .devroot/dev.sh 300 build
bash .devroot/dev.sh $((560 - $(date +%s) + T0)) cuda_tests
while ! grep -q "wide step rc=" /tmp/R/train-wide.out 2>/dev/null && [ $(( $(date +%s) - T0 )) -lt 575 ]; do sleep 5; done
tar czf $OUT/results.tgz -C /tmp R; cp /tmp/R/summary.txt $OUT/ 2>/dev/null
