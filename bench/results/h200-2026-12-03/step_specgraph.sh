set -x
R=$1
# Issue 19: verify steps captured in CUDA graphs per (batch, width) (docs/speculative-decoding.md,
# "CUDA"). Run by ../h200-2026-12-02/dev.sh as step `specgraph` after `build`.
# 1. The tests: graphed verify rows equal eager ones and decode rows bit for bit (widths 2-5 at C1,
#    C2 of mixed widths, C4, and C4 with the verify-graph cap at 1); rollback by records and by
#    recompute with the records written inside graphs and eagerly; greedy with k = 1..3 drafts
#    equals greedy without at C1 and C4, graphed and eager. The decode-graph tests beside them (the
#    whole suite runs in dev.sh's cuda_tests step; this step stays within its 400 s).
./build/tests/sparkglm_cuda_tests \
  --gtest_filter='*CudaSpeculation*:CudaModelRunner*:CudaStepPipeline*' \
  --gtest_output=json:$R/specgraph-tests.json 2>&1 | grep -v '^\[       OK \]' | tail -80
# 2. Verify steps graphed and eager in one call: each cell alternates a decode step (graphed), a
#    verify step (graphed) and the same verify step eagerly (ModelRunner::set_eager); the JSON has
#    verify_over_decode, eager.median_ms, graphed_over_eager and graphs (captures, bytes).
#    verify_c8_w5 is 40 rows: beyond kDecodeMaxRows, eager both ways (graphed_over_eager ~ 1).
./build/bench/sparkglm-runner-bench --device cuda --preset glm-5.3-flash --num-layers 8 \
  --cells verify_c1_w2,verify_c1_w3,verify_c1_w4,verify_c1_w5,verify_c4_w3,verify_c8_w3,verify_c8_w5 \
  --out $R/rbsg-glm8-verify.json
./build/bench/sparkglm-runner-bench --device cuda --preset tinyglm \
  --cells verify_c1_w2,verify_c1_w3,verify_c1_w4,verify_c1_w5,verify_c4_w3,verify_c4_w4 \
  --out $R/rbsg-tinyglm-verify.json
for f in $R/rbsg-*.json; do
  echo "== $f"
  python3 -c "
import json, sys
d = json.load(open('$f'))
for c in d['cells']:
    if 'skipped' in c: print(c['cell'], 'skipped:', c['skipped']); continue
    print('%-14s decode %.3f ms  verify %.3f ms (x%.2f)  eager %.3f ms  graphed/eager %.3f  %s' % (
        c['cell'], c['decode']['median_ms'], c['median_ms'], c['verify_over_decode'],
        c.get('eager', {}).get('median_ms', float('nan')), c.get('graphed_over_eager', float('nan')),
        json.dumps(c.get('graphs', {}))))
"
done
