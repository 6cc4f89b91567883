R=$1; T0=$(date +%s)
M=tinyglm/weights/tinyglm-micro-trained-mtp-onpolicy-1200 P=tinyglm/weights/tinyglm-micro-trained/heldout.json
cells() { python3 -c "
import json,sys
d=json.load(open(sys.argv[1]))
for c in d['cells']:
  t=c.get('draft_step_time') or {}
  print('  C%d k%d %.0f tok/s tps/step %.3f %s lag %.1f run %.1f launch %.1f between %.1f main %.1f'%(c['concurrency'],c['k'],c['median_decode_tok_s'],c['tokens_per_verify_step'],c['output_sha256'][:8],t.get('lag_us',0),t.get('run_us',0),t.get('launch_us',0),t.get('between_us',0),t.get('main_us',0)))" $1; }
timeout 170 ./build/tests/sparkglm_cuda_tests > $R/tests.log 2>&1
echo "tests rc=$? +$(( $(date +%s) - T0 ))s"; grep -E "^\[  (PASSED|FAILED|SKIPPED) +\]|FAILED  \]|Failure" $R/tests.log | head -12
for i in 1 2 3; do for b in base ngb conv fold2 allfold2; do
  [ $(( $(date +%s) - T0 )) -gt 510 ] && { echo "stop at +$(( $(date +%s) - T0 ))s"; break 2; }
  timeout 45 ./build/bench/speculation_bench_$b --device cuda --model $M --prompts $P --k 0,3 --concurrency 1,4 --waves 8 --max-tokens 128 --reps 3 > $R/g2-$b-$i.json 2> $R/g2-$b-$i.log; echo "$b $i rc=$? +$(( $(date +%s) - T0 ))s"; cells $R/g2-$b-$i.json
done; done
