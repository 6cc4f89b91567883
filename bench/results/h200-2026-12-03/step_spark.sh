set -x
R=$1
# --precision-mode spark on the CUDA backend (issue 15), run through ../h200-2026-12-02/dev.sh
# (copied with this script into .devroot/: `bash .devroot/dev.sh 560 build spark`). Writes
# spark.log (the driver's) and spark_tests.json, spark_ab.txt (the printed NMSE / greedy agreement
# lines, SPARK_AB the whole tinyglm GPU strict vs GPU spark), rb-spark-tinyglm-{bf16,fp4-local}-
# {strict,spark}.json and the G2 A/B bundle. Spark on the H200 is an emulation (docs/cuda-engine.md,
# "Precision modes"): its prefill streams the experts per group of 8 pairs, so its speed says
# nothing about GB10's FP4 tensor cores.
# 1. The spark tests: the device's FP4 rounding and NVFP4 conversion against the CPU's bit for bit,
#    the spark MoE and the CUDA runner in spark against the CPU's (tolerance printed), strict's
#    arena unchanged, and the tinyglm A/B line (SPARK_AB: logit NMSE, greedy agreement).
./build/tests/sparkglm_cuda_tests --gtest_filter='Spark*:DeviceWeightsFp4.*:CudaMoeQuant*' \
  --gtest_output=json:$R/spark_tests.json
rc=$?
grep -h "SPARK_AB\|NMSE\|greedy agreement" $R/spark.log > $R/spark_ab.txt 2>/dev/null
# 2. Decode and prefill speed, strict against spark, tinyglm bf16 and fp4-local, the same call.
for f in bf16 fp4-local; do
  for m in strict spark; do
    ./build/bench/sparkglm-runner-bench --device cuda --preset tinyglm --weight-format $f \
      --precision-mode $m --cells decode_c1,decode_c8,prefill_8k --out $R/rb-spark-tinyglm-$f-$m.json
  done
done
# 3. G2 A/B through the server: strict (A) against spark (B) on tinyglm.
./build/sparkglm-qualify run --gate G2 --preset tinyglm --device cuda --ab \
  --option precision-mode=spark --workload multi-turn --scale 1 \
  --id 2026-12-03-g2-ab-spark-cuda-h200 \
  --title "A/B on the H200: --precision-mode spark (emulated FP4) against strict (tinyglm, scale 1; issue 15)" \
  --out $R/2026-12-03-g2-ab-spark-cuda-h200
exit $rc
