set -x
R=$1
# glm-5.3-flash in FP4-Local at the deepest depth one H200 holds (sparkglm plan: 28 of 45 layers at
# --gpu-memory-utilization 0.9), dummy weights quantized on the device; then tinyglm in both formats.
./build/sparkglm plan --preset glm-5.3-flash --weight-format fp4-local --gpu h200 --gpus 1 | tee $R/plan-glm-fp4.txt
./build/bench/sparkglm-runner-bench --device cuda --preset glm-5.3-flash --num-layers 28 --weight-format fp4-local --cells decode_c1,decode_c4,decode_c8,prefill_8k,prefill_32k --runs 2 --max-seconds 200 --out $R/rb15-glm28-fp4.json
./build/bench/sparkglm-runner-bench --device cuda --preset tinyglm --weight-format fp4-local --cells decode_c1,decode_c4,decode_c8,prefill_8k --runs 2 --max-seconds 60 --out $R/rb15-tinyglm-fp4.json
./build/bench/sparkglm-runner-bench --device cuda --preset tinyglm --weight-format bf16 --cells decode_c1,decode_c4,decode_c8,prefill_8k --runs 2 --max-seconds 60 --out $R/rb15-tinyglm-bf16.json
./build/sparkglm-qualify measure --runner-bench $R/rb15-glm28-fp4.json --runner-bench $R/rb15-tinyglm-fp4.json --runner-bench $R/rb15-tinyglm-bf16.json --title "FP4-Local on the H200: glm-5.3-flash at 28 of 45 layers, tinyglm fp4-local vs bf16 (issue 15)" --id 2026-12-02-fp4-local-engine-h200 --out $R/2026-12-02-fp4-local-engine-h200
