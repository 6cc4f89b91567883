# Started in the background before dev.sh's build (no build needed): run D, the on-policy MTP module
# of run C (tinyglm-micro-trained-mtp-onpolicy: the same prompts, replies and options) at 1,200
# steps where C took 600, on the GPU. step_d.sh waits for it. Output: out/mtp-onpolicy-d.
R=/tmp/R; mkdir -p $R out/onpolicy
OP=tinyglm/train/finetune_mtp_onpolicy.py D=tinyglm/weights/tinyglm-micro-trained-mtp-distill
T0=$(date +%s); el() { echo "+$(( $(date +%s) - T0 ))s"; }
python3 $OP prompts --out out/onpolicy/prompts-c.json --count 3072 --buckets 512,1024,2048,4096 > $R/prompts.log 2>&1
sha256sum out/onpolicy/prompts-c.json; echo "prompts $(el)"
zcat bench/results/device-2026-12-07-s37/call1/replies-c.json.gz > out/onpolicy/replies-c.json
sha256sum out/onpolicy/replies-c.json
python3 $OP train --device cuda --checkpoint $D --prompts out/onpolicy/prompts-c.json \
  --replies out/onpolicy/replies-c.json --out out/mtp-onpolicy-d --steps 1200 --pass-weights 2,1,1 --log-every 40 > $R/train-d.log 2>&1
echo "train d rc=$? $(el)"; tail -3 $R/train-d.log
