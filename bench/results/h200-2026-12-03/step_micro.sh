set -x
R=$1
# Issue 18 (also unblocks 19): the CUDA backend serves tinyglm-micro's geometry. Run with dev.sh
# (bench/results/h200-2026-12-02/dev.sh) after its build step, from the repository root:
# `dev.sh 575 build micro microg1`. G1 of the templated kernels is step_microg1.sh (dev.sh gives
# a step at most 400 s, and the tests plus G1 would not fit in one).
# 1. The end-to-end runner tests over both served geometries (tinyglm's production shapes and the
#    trained tinyglm-micro), batch invariance at both, and the refusal of a geometry not served.
./build/tests/sparkglm_cuda_tests \
  --gtest_filter='ServedModels/*:SparkRunner.*' \
  --gtest_output=json:$R/micro_tests.json > $R/micro_tests.txt 2>&1
tests_rc=$?
tail -40 $R/micro_tests.txt
# 2. The held-out quality of the trained checkpoint on the GPU (bf16 latents: fp8_g128 records of
#    kv_lora_rank 64 are refused on the CUDA backend, see docs/cuda-engine.md).
./build/sparkglm-qualify quality --device cuda --out $R/2026-12-03-quality-micro-cuda-h200 \
  > $R/quality_micro_cuda.txt 2>&1
quality_rc=$?
cat $R/quality_micro_cuda.txt
# 3. sparkglm-serve on the trained checkpoint: one greedy completion through the HTTP server.
./build/sparkglm-serve --model tinyglm/weights/tinyglm-micro-trained --device cuda --port 18893 \
  > $R/serve_micro.log 2>&1 &
serve_pid=$!
for i in $(seq 1 60); do curl -sf localhost:18893/health > /dev/null && break; sleep 1; done
curl -s localhost:18893/v1/completions -H 'Content-Type: application/json' \
  -d '{"prompt": "Q: 23+45=? A: ", "max_tokens": 16, "temperature": 0}' | tee $R/serve_micro_completion.json
echo
kill $serve_pid
wait $serve_pid
tail -20 $R/serve_micro.log
echo "tests rc=$tests_rc quality rc=$quality_rc"
exit $((tests_rc != 0 || quality_rc != 0))
