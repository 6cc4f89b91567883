# Session 37 call 1: the tree is HEAD + main-us.patch (DraftStepTimes::main_seconds) + the on-policy
# script's --device. (1) the speculation and step-pipeline CUDA suites beside drawing run B's prompt
# set (CPU); (2) the distilled micro's greedy replies to it on the GPU; (3) the on-policy module
# trained on them on the GPU (run C: B's options); (4) G2's cells, distilled and C alternated.
R=$1
T0=$(date +%s); el() { echo "+$(( $(date +%s) - T0 ))s"; }
D=tinyglm/weights/tinyglm-micro-trained-mtp-distill P=tinyglm/weights/tinyglm-micro-trained/heldout.json
OP=tinyglm/train/finetune_mtp_onpolicy.py
mkdir -p out/onpolicy
python3 $OP prompts --out out/onpolicy/prompts-c.json --count 3072 --buckets 512,1024,2048,4096 > $R/prompts.log 2>&1 &
./build/tests/sparkglm_cuda_tests --gtest_filter='CudaSpeculation*:CudaStepPipeline*' \
  --gtest_output=json:$R/tests.json > $R/tests.log 2>&1
echo "tests rc=$? $(el)"; grep -E "^\[  (PASSED|FAILED|SKIPPED) +\]|tests ran|FAILED  \]|Failure|Expected|Which is" $R/tests.log | head -30
wait; echo "prompts $(el)"; cat $R/prompts.log; sha256sum out/onpolicy/prompts-c.json
timeout 150 ./build/bench/speculation_bench --device cuda --model $D --prompts out/onpolicy/prompts-c.json --k 0 \
  --concurrency 48 --waves 64 --max-tokens 128 --reps 1 --outputs out/onpolicy/replies-c.json > $R/replies-gen.json 2> $R/replies-gen.log
echo "replies rc=$? $(el)"; tail -3 $R/replies-gen.log; sha256sum out/onpolicy/replies-c.json
gzip -c out/onpolicy/replies-c.json > $OUT/replies-c.json.gz
left=$(( 300 - ($(date +%s) - T0) ))
timeout $left python3 $OP train --device cuda --checkpoint $D --prompts out/onpolicy/prompts-c.json \
  --replies out/onpolicy/replies-c.json --out out/mtp-onpolicy-c --steps 600 --pass-weights 2,1,1 --log-every 20 > $R/train.log 2>&1
echo "train rc=$? (limit ${left}s) $(el)"; head -2 $R/train.log; tail -4 $R/train.log
[ -f out/mtp-onpolicy-c/training.json ] && tar czf $OUT/mtp-onpolicy-c.tgz out/mtp-onpolicy-c
ab() { # ab RUN NAME=DIR...: G2's cells for each model
  local i=$1; shift
  for v in "$@"; do n=${v%%=*} m=${v#*=}
  timeout 60 ./build/bench/speculation_bench --device cuda --model $m --prompts $P --k 0,2,3 --concurrency 1,4 \
    --waves 8 --max-tokens 128 --reps 3 > $R/ab-$n-$i.json 2> $R/ab-$n-$i.log; echo "ab $n $i rc=$? $(el)"
  python3 -c "
import json,sys; d=json.load(open('$R/ab-$n-$i.json'))
for c in d['cells']:
  t=c['draft_step_time']; print('  C%d k%d %.0f tok/s steady %.0f tps/step %.3f %s run %.1f main %.1f between %.1f lag %.1f'%(c['concurrency'],c['k'],c['median_decode_tok_s'],c['median_steady_decode_tok_s'],c['tokens_per_verify_step'],c['output_sha256'][:8],t['run_us'],t.get('main_us',0),t.get('between_us',0),t['lag_us']))"
  done
}
C=out/mtp-onpolicy-c
if [ -f $C/training.json ]; then ab 1 distill=$D c=$C; ab 2 c=$C distill=$D; else ab 1 distill=$D; fi
# (5) if time is left: run D, C's data and options at 1,200 steps, then its cells beside the distilled module's
left=$(( 440 - ($(date +%s) - T0) ))
if [ -f $C/training.json ] && [ $left -gt 120 ]; then
  timeout $(( left - 45 )) python3 $OP train --device cuda --checkpoint $D --prompts out/onpolicy/prompts-c.json \
    --replies out/onpolicy/replies-c.json --out out/mtp-onpolicy-d --steps 1200 --pass-weights 2,1,1 --log-every 40 > $R/train-d.log 2>&1
  echo "train d rc=$? $(el)"; tail -2 $R/train-d.log
  [ -f out/mtp-onpolicy-d/training.json ] && { tar czf $OUT/mtp-onpolicy-d.tgz out/mtp-onpolicy-d; ab 3 d=out/mtp-onpolicy-d distill=$D; }
fi
