# Carried binaries on the H200 (session 14): the MoE combine / shared SwiGLU / group / router and
# mHC finish kernels spread over more blocks (issue 15). Tests first, then the runner bench of the
# binaries before (old) and after (new) the change, alternated in the same call.
set -x
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export SPARKGLM_SOURCE_DIR="$(pwd)"
R=/tmp/R18; mkdir -p $R build old
tar xzf .devbins/new.tgz -C build && tar xzf .devbins/old.tgz -C old
T0=$(date +%s)
fin() { tar czf $OUT/r.tgz -C /tmp R18; }
trap fin EXIT
timeout 150 ./build/tests/sparkglm_cuda_tests --gtest_filter='CudaModelRunner.*:CudaOperators.*:CudaMoeQuant.*:SparkMoe.*:ServedModels/*:Batch/CudaSpeculationVerify.*:CudaStepPipeline.*' \
  --gtest_output=json:$R/tests.json > $R/tests.log 2>&1
echo "tests rc=$? after $(( $(date +%s) - T0 ))s"; grep -E "^\[  (PASSED|FAILED|SKIPPED)|FAILED  \]" $R/tests.log | head -20
for rep in 1 2; do
  for v in old build; do
    timeout 60 ./$v/bench/sparkglm-runner-bench --device cuda --preset glm-5.3-flash --num-layers 8 --weight-format fp4-local --cells decode_c1,decode_c8 --runs 1 --gpu-memory-utilization 0.5 --out $R/rb-glm8-fp4-$v-$rep.json > $R/rb-glm8-fp4-$v-$rep.log 2>&1
    timeout 40 ./$v/bench/sparkglm-runner-bench --device cuda --preset tinyglm --weight-format bf16 --cells decode_c1,decode_c4 --runs 1 --gpu-memory-utilization 0.5 --out $R/rb-tinyglm-bf16-$v-$rep.json > $R/rb-tinyglm-bf16-$v-$rep.log 2>&1
    echo "$v rep $rep after $(( $(date +%s) - T0 ))s"
  done
  [ $(( $(date +%s) - T0 )) -gt 200 ] && break
done
python3 - $R <<'PY'
import json,glob,sys
for f in sorted(glob.glob(sys.argv[1]+'/rb-*.json')):
    try: d=json.load(open(f))
    except Exception as e: print(f, 'unreadable', e); continue
    print(f.split('/')[-1], ' '.join(f"{c['cell']} {c['median_ms']:.3f}ms {c.get('fraction_of_floor',0):.3f}" for c in d['cells']))
PY
