R=$1
M=tinyglm/weights/tinyglm-micro-trained-mtp-onpolicy-1200 P=tinyglm/weights/tinyglm-micro-trained/heldout.json
cells() { python3 -c "
import json,sys
d=json.load(open(sys.argv[1]))
for c in d['cells']:
  t=c.get('draft_step_time') or {}
  print('  C%d k%d %.0f tok/s tps/step %.3f %s lag %s run %s dev %s'%(c['concurrency'],c['k'],c['median_decode_tok_s'],c['tokens_per_verify_step'],c['output_sha256'][:8],t.get('lag_us'),t.get('run_us'),t.get('device_us')))" $1; }
for i in 1 2; do for b in base parity new; do x=speculation_bench; [ $b != new ] && x=speculation_bench_$b
  timeout 45 ./build/bench/$x --device cuda --model $M --prompts $P --k 0,3 --concurrency 1,4 --waves 8 --max-tokens 128 --reps 3 > $R/g2-$b-$i.json 2> $R/g2-$b-$i.log; echo "$b $i rc=$?"; cells $R/g2-$b-$i.json
done; done
timeout 300 ./build/tests/sparkglm_cuda_tests --gtest_filter='*CudaSpeculation*:*CudaStepPipeline*:*Graph*:*Sampl*:*Greedy*:*Gemv*:*CudaOperators*:*CudaModelRunner*' > $R/tests.log 2>&1
echo "tests rc=$?"; grep -E "^\[  (PASSED|FAILED|SKIPPED) +\]|FAILED  \]|Failure" $R/tests.log | head -30
./build/tests/sparkglm_cuda_tests_mut --gtest_filter='*ChainsFromInsideTheVerifyStep*' > $R/mut.log 2>&1
echo "mutation (begin picks the first verify row's draft) rc=$? (nonzero expected)"; grep -E "^\[  (PASSED|FAILED) +\]|FAILED  \]" $R/mut.log | head
