R=$1
./build/tests/sparkglm_cuda_tests --gtest_filter='*CudaSpeculation*:*CudaStepPipeline*' --gtest_output=json:$R/fix-tests.json > $R/fix-tests.log 2>&1
echo "tests rc=$?"; grep -E "^\[  (PASSED|FAILED|SKIPPED) +\]|FAILED  \]|Failure|Expected|Which is|invariant|EightSlices" $R/fix-tests.log | head -30
timeout 60 ./build/bench/speculation_bench --device cuda --model tinyglm/weights/tinyglm-micro-trained-mtp-onpolicy --prompts tinyglm/weights/tinyglm-micro-trained/heldout.json --k 0,4 --concurrency 8 --waves 2 --max-tokens 128 --reps 1 > $R/c8k4.json 2> $R/c8k4.log
echo "c8 k4 bench rc=$?"; python3 -c "
import json
for c in json.load(open('$R/c8k4.json'))['cells']: print(c['concurrency'],c['k'],round(c['median_decode_tok_s']),c['tokens_per_verify_step'],c['output_sha256'][:8],c['step_chains_per_verify_step'])"
P=tinyglm/weights/tinyglm-micro-trained/heldout.json
for i in 1 2; do for v in c=tinyglm/weights/tinyglm-micro-trained-mtp-onpolicy d=tinyglm/weights/tinyglm-micro-trained-mtp-onpolicy-1200; do n=${v%%=*} m=${v#*=}
  timeout 40 ./build/bench/speculation_bench --device cuda --model $m --prompts $P --k 0,2,3 --concurrency 1,4 --waves 8 --max-tokens 128 --reps 3 > $R/g2-$n-$i.json 2> $R/g2-$n-$i.log; echo "$n $i rc=$?"
  python3 -c "
import json
for c in json.load(open('$R/g2-$n-$i.json'))['cells']: print('  C%d k%d %.0f tok/s tps/step %.3f %s'%(c['concurrency'],c['k'],c['median_decode_tok_s'],c['tokens_per_verify_step'],c['output_sha256'][:8]))"
done; done
