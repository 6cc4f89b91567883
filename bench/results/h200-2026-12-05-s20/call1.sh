# call 1: build from source with the lookup training beside it on the GPU, then every CUDA test, then
# the quality gate on CUDA once the training is done (it sizes the KV pool from free memory)
set -u; T0=$(date +%s); mkdir -p /tmp/R /tmp/S
python3 -c 'import torch; print(torch.__version__, torch.cuda.get_device_name())' > /tmp/R/torch.txt 2>&1
if [ ! -e /tmp/S/train.started ]; then touch /tmp/S/train.started
( timeout 500 python3 tinyglm/train/extend_context.py --checkpoint tinyglm/weights/tinyglm-micro-trained \
    --out /tmp/R/micro-lookup --steps 400 --long-buckets 1536,3072 --replay 0.5 --tokens-per-step 32768 \
    --lr 1e-3 > /tmp/R/train-lookup.log 2>&1; echo "lookup rc=$?" >> /tmp/R/train-lookup.log ) &
fi
bash .devroot/dev.sh 300 build
( nice -n 10 bash .devroot/step_pdl_build.sh /tmp/R > /tmp/R/pdl-build-step.log 2>&1 && touch /tmp/S/pdl_build.done ) &
bash .devroot/dev.sh $((560 - $(date +%s) + T0)) cuda_tests
while ! grep -q "lookup rc=" /tmp/R/train-lookup.log 2>/dev/null && [ $(( $(date +%s) - T0 )) -lt 470 ]; do sleep 5; done
bash .devroot/dev.sh $((575 - $(date +%s) + T0)) quality
wait
tar czf $OUT/results.tgz -C /tmp R; cp /tmp/R/summary.txt $OUT/
