set -x
R=$1
# Issue 18: the kernels that became two-instantiation templates (production, tinyglm-micro), timed
# and checked on their production shapes, to compare with the G1 bundles committed before.
# G1 on the production shapes of every family whose kernels became templates (mhc, kda, mla,
#    mla_prefill, dsa, moe): compare with the committed bundle
#    receipts/results/2026-11-30-g1-cuda-operators-h200 (same rows, same floors) before/after.
./build/bench/cuda/g1_operators --only mhc,kda,mla,mla_prefill,dsa,moe --runs 30 \
  --out $R/g1-micro-templates.json > $R/g1-micro-templates.log 2>&1
g1_rc=$?
tail -5 $R/g1-micro-templates.log
./build/sparkglm-qualify run --gate G1 --operators $R/g1-micro-templates.json \
  --id 2026-12-03-g1-micro-templates-h200 --out $R/2026-12-03-g1-micro-templates-h200 \
  --title "G1 of the mHC, KDA, MLA, DSA and MoE kernels after they became two-instantiation templates (production, tinyglm-micro), on the H200 (issue 18)"
exit $g1_rc
