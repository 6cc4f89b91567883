# Written in session 29, not run: issue 15's runner-bench cells on an H200 with PDL over the decode
# path (7dd683f and later): tinyglm BF16 at the G2 cells (C1, C4, C8 decode, 8K prefill), tinyglm
# and glm-5.3-flash (28 of 45 layers) in fp4-local, one bundle judged by G2. Session 29 measured
# only tinyglm BF16 C1 / C4, on an H100 (66.7 % of floor at C1). Run as
# `bash .devroot/dev.sh 560 build rb_g2` with this file copied to .devroot/step_rb_g2.sh (about
# 130 s build, 250 s of benches).
R=$1
timeout 80 ./build/bench/sparkglm-runner-bench --device cuda --preset tinyglm --weight-format bf16 \
  --cells decode_c1,decode_c4,decode_c8,prefill_8k --runs 2 --max-seconds 60 --out $R/rb-g2-tinyglm-bf16.json \
  > $R/rb-g2-tinyglm-bf16.log 2>&1; echo "tinyglm bf16 rc=$?"
timeout 80 ./build/bench/sparkglm-runner-bench --device cuda --preset tinyglm --weight-format fp4-local \
  --cells decode_c1,decode_c4,decode_c8,prefill_8k --runs 2 --max-seconds 60 --out $R/rb-g2-tinyglm-fp4.json \
  > $R/rb-g2-tinyglm-fp4.log 2>&1; echo "tinyglm fp4 rc=$?"
timeout 220 ./build/bench/sparkglm-runner-bench --device cuda --preset glm-5.3-flash --num-layers 28 \
  --weight-format fp4-local --cells decode_c1,decode_c4,decode_c8 --runs 2 --max-seconds 200 \
  --out $R/rb-g2-glm28-fp4.json > $R/rb-g2-glm28-fp4.log 2>&1; echo "glm28 fp4 rc=$?"
cp $R/rb-g2-*.json $OUT/ 2>/dev/null
