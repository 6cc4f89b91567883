set -x
R=$1
shift
PARTS=${*:-"g1 glm tiny"}
# Issue 15: quantized_gemv streams each warp's rows through shared memory (cp.async, a stage in
# flight while the previous computes) and splits k over blocks for weights of few tiles. Run by
# ../h200-2026-12-02/dev.sh as `bash .devroot/dev.sh 590 build cuda_tests stream21` (copy this
# file into .devroot/ as step_stream21.sh); parts may be named after $R to run a subset.
rc=0
for part in $PARTS; do
  case $part in
  g1)
    # G1 rows of quantized_gemv (peer "baseline": the 2026-12-02 kernel, same bits) and the
    # quantized MoE decode (its shared expert goes through quantized_gemv), one run.
    ./build/bench/cuda/g1_operators --only quantized,moe_quant --runs 30 --out $R/g1-stream21.json
    rc=$((rc | $?))
    ./build/sparkglm-qualify run --gate G1 --operators $R/g1-stream21.json --id 2026-12-04-g1-quant-stream-h200 --out $R/2026-12-04-g1-quant-stream-h200 --title "quantized_gemv streamed through shared memory (cp.async) and split over blocks for few-tile weights, against the 2026-12-02 kernel in the same run, on the H200 (issue 15)"
    ;;
  glm)
    # glm-5.3-flash fp4-local at 28 of 45 layers: decode C1 / C4 / C8, beside bundle
    # 2026-12-03-decode-spread-after-h200 (9.40 ms at C1).
    ./build/bench/sparkglm-runner-bench --device cuda --preset glm-5.3-flash --num-layers 28 --weight-format fp4-local --cells decode_c1,decode_c4,decode_c8 --runs 2 --max-seconds 150 --gpu-memory-utilization 0.5 --out $R/rb-stream21-glm28-fp4.json
    rc=$((rc | $?))
    ./build/sparkglm-qualify measure --runner-bench $R/rb-stream21-glm28-fp4.json --title "glm-5.3-flash fp4-local decode at 28 of 45 layers, quantized_gemv streamed through shared memory (issue 15)" --id 2026-12-04-fp4-local-decode-stream-h200 --out $R/2026-12-04-fp4-local-decode-stream-h200
    ;;
  tiny)
    ./build/bench/sparkglm-runner-bench --device cuda --preset tinyglm --weight-format fp4-local --cells decode_c1,decode_c4,decode_c8 --runs 2 --gpu-memory-utilization 0.5 --out $R/rb-stream21-tinyglm-fp4.json
    ;;
  esac
done
exit $rc
