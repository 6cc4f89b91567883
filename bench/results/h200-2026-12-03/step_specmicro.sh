set -x
R=$1
# Issue 19's measurement: the trained tinyglm-micro on the CUDA runner, decode tok/s at C1, C4, C8
# for k = 0..3 drafts, acceptance by position, output hashes (equal across k when verify is
# canonical); graphed (the default) with both rollbacks, then k = 0, 1 eager for the graphs' share.
M=tinyglm/weights/tinyglm-micro-trained
./build/bench/speculation_bench --device cuda --model $M --prompts $M/heldout.json \
  --k 0,1,2,3 --concurrency 1,4 --max-tokens 128 --reps 3 --rollback records \
  > $R/spec-micro-cuda-records.json 2> $R/spec-micro-cuda-records.log
./build/bench/speculation_bench --device cuda --model $M --prompts $M/heldout.json \
  --k 0,1,2,3 --concurrency 1 --max-tokens 128 --reps 3 --rollback recompute \
  > $R/spec-micro-cuda-recompute.json 2> $R/spec-micro-cuda-recompute.log
./build/bench/speculation_bench --device cuda --enforce-eager --model $M --prompts $M/heldout.json \
  --k 0,1 --concurrency 1 --max-tokens 128 --reps 3 > $R/spec-micro-cuda-eager.json 2> $R/spec-micro-cuda-eager.log
for f in $R/spec-micro-cuda-*.json; do
  echo "== $f"
  python3 -c "
import json
d = json.load(open('$f'))
for c in d['cells']:
    print('C%-2d k=%d %-9s %8.0f tok/s  steady %8.0f  acc %s  tok/step %.3f  %s' % (c['concurrency'], c['k'],
        c['rollback'], c['median_decode_tok_s'], c['median_steady_decode_tok_s'],
        ','.join('%.3f' % a for a in c['acceptance_by_position']), c['tokens_per_verify_step'],
        c['output_sha256'][:12]))
"
done
