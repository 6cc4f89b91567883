# Session 37 call 2: the parameterized speculation suites (call 1's filter missed Rollback/* and
# Batch/*, where main_seconds is asserted), then G2's cells for C and the distilled module
# alternated (runs 3 and 4).
R=$1
T0=$(date +%s); el() { echo "+$(( $(date +%s) - T0 ))s"; }
D=tinyglm/weights/tinyglm-micro-trained-mtp-distill P=tinyglm/weights/tinyglm-micro-trained/heldout.json
OP=tinyglm/train/finetune_mtp_onpolicy.py
mkdir -p out/onpolicy && tar xzf .devroot/mtp-onpolicy-c.tgz && zcat .devroot/replies-c.json.gz > out/onpolicy/replies-c.json
python3 $OP prompts --out out/onpolicy/prompts-c.json --count 3072 --buckets 512,1024,2048,4096 > $R/prompts.log 2>&1 &
./build/tests/sparkglm_cuda_tests --gtest_filter='*CudaSpeculation*:*CudaStepPipeline*' \
  --gtest_output=json:$R/tests.json > $R/tests.log 2>&1
echo "tests rc=$? $(el)"; grep -E "^\[  (PASSED|FAILED|SKIPPED) +\]|tests ran|FAILED  \]|Failure|Expected|Which is" $R/tests.log | head -30
wait; sha256sum out/onpolicy/prompts-c.json out/onpolicy/replies-c.json
MODELS="c=out/mtp-onpolicy-c distill=$D"; for i in 3 4; do for v in $MODELS; do n=${v%%=*} m=${v#*=}
  timeout 60 ./build/bench/speculation_bench --device cuda --model $m --prompts $P --k 0,2,3 --concurrency 1,4 \
    --waves 8 --max-tokens 128 --reps 3 > $R/ab-$n-$i.json 2> $R/ab-$n-$i.log; echo "ab $n $i rc=$? $(el)"
  python3 -c "
import json,sys; d=json.load(open('$R/ab-$n-$i.json'))
for c in d['cells']:
  t=c['draft_step_time']; print('  C%d k%d %.0f tok/s steady %.0f tps/step %.3f %s run %.1f main %.1f lag %.1f'%(c['concurrency'],c['k'],c['median_decode_tok_s'],c['median_steady_decode_tok_s'],c['tokens_per_verify_step'],c['output_sha256'][:8],t['run_us'],t.get('main_us',0),t['lag_us']))"
done; done
