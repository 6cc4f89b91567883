# Session 35: the tree holds three verify-step cuts (the MTP module reads the picks directly; the
# main rows' copies on a branch beside the MTP passes; one MLA decode launch where a split holds
# every list). (1) every CUDA test but the quantized-operator suites while the base (HEAD: the
# tree with tree.patch reversed) builds beside them; (2) the distilled micro at G2's cells
# (--waves 8), tree and base alternated, two runs each.
R=$1
source .devroot/variant.sh
T0=$(date +%s); el() { echo "+$(( $(date +%s) - T0 ))s"; }
(build_variant /tmp/base tree.patch -R speculation_bench; echo "base built rc=$? $(el)") > $R/base-bg.log 2>&1 &
./build/tests/sparkglm_cuda_tests --gtest_filter='-DeviceWeightsFp4.*:CudaMoeQuant.*:CudaQuantizedGemv.*' \
  --gtest_output=json:$R/tests.json > $R/tests.log 2>&1
echo "tree tests rc=$? $(el)"; grep -E "^\[  (PASSED|FAILED|SKIPPED) +\]|tests ran|FAILED  \]" $R/tests.log | head -20
wait; cat $R/base-bg.log
M=tinyglm/weights/tinyglm-micro-trained-mtp-distill P=tinyglm/weights/tinyglm-micro-trained/heldout.json
for i in 1 2; do for v in tree=. base=/tmp/base; do n=${v%%=*} d=${v#*=}
  timeout 60 $d/build/bench/speculation_bench --device cuda --model $M --prompts $P --k 0,2,3 --concurrency 1,4 \
    --waves 8 --max-tokens 128 --reps 3 > $R/ab-$n-$i.json 2> $R/ab-$n-$i.log; echo "ab $n $i rc=$? $(el)"
  python3 -c "
import json,sys; d=json.load(open('$R/ab-$n-$i.json'))
for c in d['cells']: print('  C%d k%d %.0f tok/s steady %.0f tps/step %.3f %s'%(c['concurrency'],c['k'],c['median_decode_tok_s'],c['median_steady_decode_tok_s'],c['tokens_per_verify_step'],c['output_sha256'][:8]))"
done; done
cp $R/ab-*.json $OUT/ 2>/dev/null
