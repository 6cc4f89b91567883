set -x
R=$1
./build/sparkglm-qualify run --gate G2 --preset tinyglm --device cuda --ab --option enable-prefix-caching=true --workload multi-turn --scale 1 --id 2026-12-02-g2-ab-prefix-cache-cuda-h200 --title "A/B on the H200: --enable-prefix-caching on multi-turn (tinyglm, scale 1; issue 17)" --out $R/2026-12-02-g2-ab-prefix-cache-cuda-h200
