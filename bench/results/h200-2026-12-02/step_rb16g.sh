set -x
R=$1
./build/bench/sparkglm-runner-bench --device cuda --preset glm-5.3-flash --num-layers 8 --cells prefill_8k,prefill_32k,prefill_128k,decode_c1_at_1k,decode_c4_at_1k,decode_c1_at_128k,decode_c4_at_128k --runs 2 --max-seconds 300 --out $R/rb16-glm.json
./build/sparkglm-qualify measure --runner-bench $R/rb16-glm.json --title "glm-5.3-flash (8 of 45 layers, dummy weights) on the H200: cold prefill 8K-128K and decode at 1K and 128K (issue 16)" --id 2026-12-02-long-context-glm-h200 --out $R/2026-12-02-long-context-glm-h200
