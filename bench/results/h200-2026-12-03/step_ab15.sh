set -x
R=$1
# Issue 15's G2 A/B on the H200: tinyglm with FP4-Local weights (quantized on the device to the CPU
# quantizer's bytes) against BF16, same binary: token agreement with the baseline, speed, and the
# gates' determinism and batch invariance for the candidate.
./build/sparkglm-qualify run --gate G2 --preset tinyglm --device cuda --ab --option weight-format=fp4-local --scale 1 --id 2026-12-03-g2-ab-fp4-local-cuda-h200 --title "A/B on the H200: --weight-format fp4-local vs bf16 (tinyglm, scale 1; issue 15)" --out $R/2026-12-03-g2-ab-fp4-local-cuda-h200
