set -x
R=$1
# G1 rows of the FP4-Local kernels after the tensor-core rewrite (decode GEMV, MoE experts), beside
# the BF16 linears and cuBLASLt, and the DSA rows (pool scores at a 1M context), same run.
./build/bench/cuda/g1_operators --only quantized,linear,dsa --runs 30 --out $R/g1-fp4.json
rc=$?
./build/sparkglm-qualify run --gate G1 --operators $R/g1-fp4.json --id 2026-12-02-g1-fp4-local-h200 --out $R/2026-12-02-g1-fp4-local-h200 --title "FP4-Local decode GEMV and MoE on tensor cores, BF16 linears, DSA at 1M on the H200 (issues 15, 16)"
exit $rc
