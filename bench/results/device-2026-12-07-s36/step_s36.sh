# Session 36 call 1: the tree is HEAD (3c542ac, StreamBranch never run on a GPU) plus
# select-short-rows.patch. (1) every CUDA test but the quantized-operator suites while the base
# (HEAD: tree.patch reversed) builds; (2) the distilled micro at G2's cells (--waves 8), tree and
# base alternated, two runs each; (3) Nsight Compute over 700 kernels of C1 k = 2, tree and base.
R=$1
source .devroot/variant.sh
T0=$(date +%s); el() { echo "+$(( $(date +%s) - T0 ))s"; }
(build_variant /tmp/base tree.patch -R speculation_bench; echo "base built rc=$? $(el)") > $R/base-bg.log 2>&1 &
./build/tests/sparkglm_cuda_tests --gtest_filter='-DeviceWeightsFp4.*:CudaMoeQuant.*:CudaQuantizedGemv.*' \
  --gtest_output=json:$R/tests.json > $R/tests.log 2>&1
echo "tree tests rc=$? $(el)"; grep -E "^\[  (PASSED|FAILED|SKIPPED) +\]|tests ran|FAILED  \]" $R/tests.log | head -20
grep -E "CudaDsaSelect|CudaMoeSharedBeside" $R/tests.log | grep -E "OK|FAILED" | head
wait; cat $R/base-bg.log
M=tinyglm/weights/tinyglm-micro-trained-mtp-distill P=tinyglm/weights/tinyglm-micro-trained/heldout.json
for i in 1 2; do for v in tree=. base=/tmp/base; do n=${v%%=*} d=${v#*=}
  timeout 60 $d/build/bench/speculation_bench --device cuda --model $M --prompts $P --k 0,2,3 --concurrency 1,4 \
    --waves 8 --max-tokens 128 --reps 3 > $R/ab-$n-$i.json 2> $R/ab-$n-$i.log; echo "ab $n $i rc=$? $(el)"
  python3 -c "
import json,sys; d=json.load(open('$R/ab-$n-$i.json'))
for c in d['cells']: print('  C%d k%d %.0f tok/s steady %.0f tps/step %.3f %s between %.1f lag %.1f'%(c['concurrency'],c['k'],c['median_decode_tok_s'],c['median_steady_decode_tok_s'],c['tokens_per_verify_step'],c['output_sha256'][:8],c['draft_step_time'].get('between_us',0),c['draft_step_time']['lag_us']))"
done; done
cp $R/ab-*.json $OUT/ 2>/dev/null
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1); echo "ncu=$NCU"
for v in tree=. base=/tmp/base; do n=${v%%=*} d=${v#*=}
  timeout 60 $NCU --clock-control none --cache-control none --metrics gpu__time_duration.sum --csv \
    --launch-skip 3000 --launch-count 700 $d/build/bench/speculation_bench --device cuda --model $M \
    --prompts $P --k 2 --concurrency 1 --max-tokens 96 --reps 1 > $R/ncu-$n.csv 2> $R/ncu-$n.log
  echo "ncu $n rc=$? $(el)"; grep select_kernel $R/ncu-$n.csv | awk -F'","' '{print $NF}' | tr -d '",' | sort -n | awk '{a[NR]=$1} END {print "select_kernel n="NR" median="a[int((NR+1)/2)]}'
  gzip -f $R/ncu-$n.csv
done
cp $R/ncu-*.csv.gz $OUT/
