set -x
R=$1
# Where a decode step of the FP4-Local engine goes: device time by part (--profile-steps).
./build/bench/sparkglm-runner-bench --device cuda --preset glm-5.3-flash --num-layers 28 --weight-format fp4-local --cells decode_c1,decode_c8 --profile-steps --out $R/prof15-glm28-fp4.json
./build/bench/sparkglm-runner-bench --device cuda --preset tinyglm --weight-format fp4-local --cells decode_c1 --profile-steps --out $R/prof15-tinyglm-fp4.json
./build/bench/sparkglm-runner-bench --device cuda --preset tinyglm --weight-format bf16 --cells decode_c1 --profile-steps --out $R/prof15-tinyglm-bf16.json
