set -x
R=$1
./build/bench/sparkglm-runner-bench --device cuda --preset glm-5.3-flash --num-layers 8 --cells decode_c1_schema,decode_c8_schema --schema bench/schemas/96-required-keys.json --decode-steps 64 --out $R/rb20-glm.json
./build/sparkglm-qualify measure --runner-bench $R/rb20-glm.json --title "Structured-output mask cost on the H200: glm-5.3-flash (8 layers, 154,880-token vocabulary), 96-key schema (issue 20)" --id 2026-12-02-structured-mask-glm-h200 --out $R/2026-12-02-structured-mask-glm-h200
