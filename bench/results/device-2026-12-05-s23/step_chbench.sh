# Session 23 (issue 19): drafts chained in the verify step against the drafter's own passes,
# alternated, same binary, the chain-trained micro; each cell with its engine step time split.
R=$1
M=tinyglm/weights/tinyglm-micro-trained-mtp-chain; P=tinyglm/weights/tinyglm-micro-trained/heldout.json
for i in 1 2; do for v in on off; do
  timeout 90 ./build/bench/speculation_bench --device cuda --model $M --prompts $P --k 0,1,2,3 \
    --concurrency 1,4 --max-tokens 128 --reps 3 --chain-in-step $v > $R/spec-chain-$v-$i.json 2> $R/spec-chain-$v-$i.log
  echo "chain $v $i rc=$?"
  python3 -c "
import json,sys
d=json.load(open('$R/spec-chain-$v-$i.json'))
for c in d['cells']:
  t=c.get('engine_step_time',{})
  print('C%d k%d %8.0f tok/s  tok/step %.2f chains/step %.2f  step %.0f us: submit %.0f collect %.0f draft %.0f other %.0f  %s' % (c['concurrency'],c['k'],c['median_decode_tok_s'],c['tokens_per_verify_step'],c.get('step_chains_per_verify_step',0),t.get('step_us',0),t.get('submit_us',0),t.get('collect_us',0),t.get('draft_us',0),t.get('other_us',0),c['output_sha256'][:8]))
" 2>&1 | tee -a $R/chbench-summary.txt
done; done
