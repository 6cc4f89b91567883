set -x
R=$1
# Decode at 1K and 1M after the multi-block DSA select (issue 16), with the step profile.
./build/bench/sparkglm-runner-bench --device cuda --preset tinyglm --cells decode_c1_at_1k,decode_c1_at_128k,decode_c1_at_1023k,decode_c4_at_1023k --runs 2 --max-seconds 300 --profile-steps --out $R/rb16d-tinyglm.json
./build/sparkglm-qualify measure --runner-bench $R/rb16d-tinyglm.json --title "tinyglm on the H200: decode at 1K-1M with the multi-block DSA select (issue 16)" --id 2026-12-02-long-decode-tinyglm-h200 --out $R/2026-12-02-long-decode-tinyglm-h200
