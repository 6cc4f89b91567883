set -x
R=$1
# The cost of a verify step of width 2-5 against a decode step on the same runner (issue 19).
./build/bench/sparkglm-runner-bench --device cuda --preset glm-5.3-flash --num-layers 8 --cells verify_c1_w2,verify_c1_w3,verify_c1_w4,verify_c1_w5,verify_c4_w3,verify_c8_w3 --out $R/rb19-glm8-verify.json
./build/bench/sparkglm-runner-bench --device cuda --preset tinyglm --cells verify_c1_w2,verify_c1_w3,verify_c1_w4,verify_c1_w5,verify_c4_w3 --out $R/rb19-tinyglm-verify.json
grep -o '"verify_over_decode":[^,]*' $R/rb19-*.json
