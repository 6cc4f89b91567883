set -x
R=$1
./build/bench/sparkglm-runner-bench --device cuda --preset tinyglm --cells prefill_8k,prefill_32k,prefill_128k,prefill_512k,prefill_1023k,decode_c1_at_1k,decode_c4_at_1k,decode_c1_at_128k,decode_c4_at_128k,decode_c1_at_1023k --runs 2 --max-seconds 380 --out $R/rb16-tinyglm.json
./build/sparkglm-qualify measure --runner-bench $R/rb16-tinyglm.json --title "tinyglm on the H200: cold prefill 8K-1M and decode at 1K-1M (issue 16)" --id 2026-12-02-long-context-tinyglm-h200 --out $R/2026-12-02-long-context-tinyglm-h200
