# Carried binaries (built on the Debian machine) on the H200: the in-step drafts (issue 19).
set -x
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export SPARKGLM_SOURCE_DIR="$(pwd)"
R=$OUT
M=tinyglm/weights/tinyglm-micro-trained
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv
timeout 240 ./build/tests/sparkglm_cuda_tests \
  --gtest_filter='*CudaSpeculation*:CudaModelRunner*:CudaStepPipeline*' \
  --gtest_output=json:$R/fused-tests.json > $R/fused-tests.log 2>&1
echo "tests rc=$?"
grep -E "FAILED|PASSED|\[ drafts|\[ graphs|Failure|Expected|Which is|actual" $R/fused-tests.log | head -60
for mode in on off; do
  ks=0,1,2,3; [ $mode = off ] && ks=1,2,3
  timeout 120 ./build/bench/speculation_bench --device cuda --model $M --prompts $M/heldout.json \
    --k $ks --concurrency 1,4 --max-tokens 128 --reps 3 --draft-in-step $mode \
    > $R/spec-micro-cuda-instep-$mode.json 2> $R/spec-micro-cuda-instep-$mode.log
  echo "bench $mode rc=$?"
  tail -3 $R/spec-micro-cuda-instep-$mode.log
done
for f in $R/spec-micro-cuda-instep-*.json; do
  echo "== $f"
  python3 -c "
import json
d = json.load(open('$f'))
for c in d['cells']:
    print('C%-2d k=%d in_step=%s %8.0f tok/s  steady %8.0f  acc %s  tok/step %.3f  step_drafts %.2f  %s' % (c['concurrency'], c['k'],
        c['draft_in_step'], c['median_decode_tok_s'], c['median_steady_decode_tok_s'],
        ','.join('%.3f' % a for a in c['acceptance_by_position']), c['tokens_per_verify_step'],
        c['step_drafts_per_verify_step'], c['output_sha256'][:12]))
"
done
timeout 120 ./build/bench/sparkglm-runner-bench --device cuda --preset glm-5.3-flash --num-layers 8 \
  --cells verify_c1_w2,verify_c1_w3,verify_c1_w5,verify_c4_w3 --out $R/rbsg-glm8-verify.json > $R/rbsg.log 2>&1
echo "rb rc=$?"
python3 -c "
import json
d = json.load(open('$R/rbsg-glm8-verify.json'))
for c in d['cells']:
    if 'skipped' in c: print(c['cell'], 'skipped'); continue
    print('%-14s decode %.3f ms  verify %.3f ms (x%.2f)  graphed/eager %.3f' % (c['cell'], c['decode']['median_ms'], c['median_ms'], c['verify_over_decode'], c.get('graphed_over_eager', float('nan'))))
"
