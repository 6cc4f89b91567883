# Carried binaries (built on the Debian machine) on the H200, session 13 call 3: the CUDA quality
# gate with its controls and the in-step drafts test on the trained micro; the speculation bench
# with device time by part, then its receipt bundle; the spark G2 A/B (issue 15) with what is left.
set -x
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export SPARKGLM_SOURCE_DIR="$(pwd)"
R=$OUT
M=tinyglm/weights/tinyglm-micro-trained
T0=$(date +%s)
timeout 200 ./build/tests/sparkglm_cuda_tests \
  --gtest_filter='CudaQualityGate*:*CudaSpeculationRollback.DraftsFromInside*' \
  --gtest_output=json:$R/call3-tests.json > $R/call3-tests.log 2>&1
echo "tests rc=$? after $(( $(date +%s) - T0 ))s"
grep -E "^\[  |\[ drafts|nll|Failure|Expected|Which is|actual" $R/call3-tests.log | grep -v "       OK" | head -60
# Device time by part of the model: k = 0 and k = 1 at C1, in-step drafts on and off.
for mode in on off; do
  timeout 60 ./build/bench/speculation_bench --device cuda --model $M --prompts $M/heldout.json \
    --k 0,1 --concurrency 1 --max-tokens 128 --reps 1 --draft-in-step $mode --profile-steps \
    > $R/spec-profile-$mode.json 2> $R/spec-profile-$mode.log
  echo "profile $mode rc=$?"
  grep -v '^{' $R/spec-profile-$mode.log | head -40
done
# The measurement behind the receipt: k = 0..3 at C1 and C4, 5 repetitions, records, in-step.
timeout 120 ./build/bench/speculation_bench --device cuda --model $M --prompts $M/heldout.json \
  --k 0,1,2,3 --concurrency 1,4 --max-tokens 128 --reps 5 > $R/spec-micro-cuda-instep.json \
  2> $R/spec-micro-cuda-instep.log
echo "bench rc=$?"
timeout 120 ./build/bench/speculation_bench --device cuda --model $M --prompts $M/heldout.json \
  --k 0,1 --concurrency 1,4 --max-tokens 128 --reps 5 --draft-in-step off \
  > $R/spec-micro-cuda-own-forward.json 2> $R/spec-micro-cuda-own-forward.log
echo "bench off rc=$?"
ID=2026-12-03-speculation-micro-cuda-h200
./build/sparkglm-qualify measure --speculation-bench $R/spec-micro-cuda-instep.json \
  --speculation-bench $R/spec-micro-cuda-own-forward.json \
  --title "Speculative decoding on the H200: the trained tinyglm-micro, k = 0..3 at C1 and C4, drafts inside the verify step (issue 19)" \
  --id $ID --out $R/$ID \
  --limitation "the micro's decode step is launch-bound (about 0.27 ms for four small layers and the head): a verify step cannot hide its extra rows, its MTP layer and its second head behind weight reads, and it is not pipelined (the host waits for it to build the next step)" \
  --limitation "chained drafts are rarely right: the MTP head was trained one position ahead only (acceptance 0.25 and 0.08 at positions 2 and 3)"
echo "measure rc=$?"
./build/sparkglm-qualify verify $R/$ID; echo "verify rc=$?"
echo "after $(( $(date +%s) - T0 ))s"
# The spark G2 A/B of issue 15 (about 5 min), with what is left of the call.
left=$(( 560 - ($(date +%s) - T0) ))
if [ $left -gt 120 ]; then
  timeout $left ./build/sparkglm-qualify run --gate G2 --preset tinyglm --device cuda --ab \
    --option precision-mode=spark --workload multi-turn --scale 1 \
    --id 2026-12-03-g2-ab-spark-cuda-h200 \
    --title "A/B on the H200: --precision-mode spark (emulated FP4) against strict (tinyglm, scale 1; issue 15)" \
    --out $R/2026-12-03-g2-ab-spark-cuda-h200 > $R/spark-ab.log 2>&1
  echo "spark A/B rc=$?"; tail -30 $R/spark-ab.log
fi
