set -x
R=$1
# The FP4-Local decode GEMV (issue 15) beside the BF16 GEMV and cuBLASLt, same run; and the DSA
# operators (the multi-block select for rows past 16,384 pools, issue 16).
./build/bench/cuda/g1_operators --only quantized,linear,dsa --runs 30 --out $R/g1-quantized.json
rc=$?
./build/sparkglm-qualify run --gate G1 --operators $R/g1-quantized.json --id 2026-12-02-g1-quantized-gemv-h200 --out $R/2026-12-02-g1-quantized-gemv-h200 --title "FP4-Local decode GEMV, BF16 GEMV and DSA operators on the H200 (issues 15, 16)"
exit $rc
