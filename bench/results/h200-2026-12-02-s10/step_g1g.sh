set -x
R=$1
# step_g1f.sh again after the harness fix (a row is compared with the widest batch of its own width).
./build/bench/cuda/g1_operators --only quantized,linear,dsa --runs 30 --out $R/g1-fp4b.json
rc=$?
./build/sparkglm-qualify run --gate G1 --operators $R/g1-fp4b.json --id 2026-12-02-g1-fp4-local-h200-r2 --out $R/2026-12-02-g1-fp4-local-h200-r2 --title "FP4-Local decode GEMV on tensor cores beside the BF16 linears, DSA pool scores at 1M, on the H200 (issues 15, 16)"
exit $rc
