set -x
R=$1
# The spark G2 A/B of issue 15 (lost in session 13: too many files under $OUT); dev.sh tars /tmp/R.
./build/sparkglm-qualify run --gate G2 --preset tinyglm --device cuda --ab \
  --option precision-mode=spark --workload multi-turn --scale 1 \
  --id 2026-12-03-g2-ab-spark-cuda-h200 \
  --title "A/B on the H200: --precision-mode spark (emulated FP4) against strict (tinyglm, scale 1; issue 15)" \
  --out $R/2026-12-03-g2-ab-spark-cuda-h200
echo "spark A/B rc=$?"
./build/sparkglm-qualify verify $R/2026-12-03-g2-ab-spark-cuda-h200; echo "verify rc=$?"
