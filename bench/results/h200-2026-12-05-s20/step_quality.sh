# The trained micro's quality gate on the GPU: held-out loss and the probes through sparkglm-serve
# on CUDA (issue 18: "G2 judges them on the CPU in CI and on the GPU"), strict and spark. Bundles
# are written under $1 and verified there; copy them to receipts/results/ from a clean tree.
R=$1; D=$(date -u +%Y-%m-%d)
./build/sparkglm-qualify quality --device cuda --out $R/$D-quality-probes-micro-cuda-h200
echo "strict rc=$?"
./build/sparkglm-qualify quality --device cuda --precision-mode spark --out $R/$D-quality-probes-micro-spark-cuda-h200
echo "spark rc=$?"
