set -x
R=$1
shift
PARTS=${*:-"tests g1 glm prof"}
# Issue 15, the quantized decode kernels (E2M1 pair table, BF16x2 scale products, gate and up
# streamed together): correctness first, then old against new in one G1 run, then the engine.
# Run by ../h200-2026-12-02/dev.sh as `bash .devroot/dev.sh 590 build quantfast` (copy this file
# into .devroot/ as step_quantfast.sh); parts may be named after $R to run a subset.
rc=0
for part in $PARTS; do
  case $part in
  tests)
    # The quantized kernels' tests, including new == baseline bit for bit
    # (CudaQuantizedGemv.CurrentKernelMatchesTheBaselineBitForBit,
    # CudaMoeQuant.DecodeKernelMatchesItsBaselineBitForBit).
    ./build/tests/sparkglm_cuda_tests --gtest_filter='CudaQuantizedGemv.*:CudaMoeQuant.*:DeviceWeightsFp4.*' --gtest_output=json:$R/quantfast-tests.json 2>&1 | tee $R/quantfast-tests.txt
    rc=$((rc | ${PIPESTATUS[0]}))
    ;;
  g1)
    # G1 rows: quantized_gemv (peer "baseline": the 2026-12-02 kernel) and the quantized MoE decode
    # at 8 / 1 / 4 tokens (routed NVFP4, shared FP8 block; peer "baseline"), both in the same run.
    ./build/bench/cuda/g1_operators --only quantized,moe_quant --runs 30 --out $R/g1-quantfast.json
    rc=$((rc | $?))
    ./build/sparkglm-qualify run --gate G1 --operators $R/g1-quantfast.json --id 2026-12-03-g1-quantfast-h200 --out $R/2026-12-03-g1-quantfast-h200 --title "Quantized decode kernels, table-driven E2M1 dequantization, against the 2026-12-02 baseline in the same run, on the H200 (issue 15)"
    ;;
  glm)
    # glm-5.3-flash fp4-local at 28 of 45 layers (the depth one H200 holds): decode C1 / C4 / C8,
    # to set beside bundle 2026-12-02-fp4-local-engine-h200 (81 / 165 / 213 tok/s).
    ./build/bench/sparkglm-runner-bench --device cuda --preset glm-5.3-flash --num-layers 28 --weight-format fp4-local --cells decode_c1,decode_c4,decode_c8 --runs 2 --max-seconds 200 --out $R/rb-quantfast-glm28-fp4.json
    rc=$((rc | $?))
    ./build/sparkglm-qualify measure --runner-bench $R/rb-quantfast-glm28-fp4.json --title "glm-5.3-flash fp4-local decode at 28 of 45 layers after the quantized-kernel changes (issue 15)" --id 2026-12-03-fp4-local-decode-h200 --out $R/2026-12-03-fp4-local-decode-h200
    ;;
  prof)
    # Where the decode step goes now (device time by part; the MoE experts were 70 % of it).
    ./build/bench/sparkglm-runner-bench --device cuda --preset glm-5.3-flash --num-layers 28 --weight-format fp4-local --cells decode_c1,decode_c8 --profile-steps --out $R/prof-quantfast-glm28-fp4.json
    ;;
  esac
done
exit $rc
