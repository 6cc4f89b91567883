R=$1
M=tinyglm/weights/tinyglm-micro-trained-mtp-onpolicy-1200 P=tinyglm/weights/tinyglm-micro-trained/heldout.json
for i in 1 2; do for b in base probe; do
  timeout 45 ./build/bench/speculation_bench_$b --device cuda --model $M --prompts $P --k 3 --concurrency 1 --waves 8 --max-tokens 128 --reps 3 > $R/probe-$b-$i.json 2> $R/probe-$b-$i.log; echo "$b $i rc=$?"
  python3 -c "
import json,sys
for c in json.load(open(sys.argv[1]))['cells']:
  t=c['draft_step_time']; print('  C%d k%d %.0f tok/s lag %.1f run %.1f launch %.1f load %.1f plan %.1f idle %.1f main %.1f'%(c['concurrency'],c['k'],c['median_decode_tok_s'],t['lag_us'],t['run_us'],t['launch_us'],t.get('load_us',0),t.get('plan_us',0),t.get('idle_us',0),t['main_us']))" $R/probe-$b-$i.json
  grep lag-probe $R/probe-$b-$i.log
done; done
