# Issue 15's runner-bench cells on an H200 (bench/results/h200-pending/step_rb_g2.sh, reordered:
# the cell only an H200 holds first; each result copied to $OUT as it lands).
R=$1
timeout 220 ./build/bench/sparkglm-runner-bench --device cuda --preset glm-5.3-flash --num-layers 28 \
  --weight-format fp4-local --cells decode_c1,decode_c4,decode_c8 --runs 2 --max-seconds 200 \
  --out $R/rb-g2-glm28-fp4.json > $R/rb-g2-glm28-fp4.log 2>&1; echo "glm28 fp4 rc=$?"; cp $R/rb-g2-glm28-fp4.* $OUT/ 2>/dev/null
timeout 80 ./build/bench/sparkglm-runner-bench --device cuda --preset tinyglm --weight-format bf16 \
  --cells decode_c1,decode_c4,decode_c8,prefill_8k --runs 2 --max-seconds 60 --out $R/rb-g2-tinyglm-bf16.json \
  > $R/rb-g2-tinyglm-bf16.log 2>&1; echo "tinyglm bf16 rc=$?"; cp $R/rb-g2-tinyglm-bf16.* $OUT/ 2>/dev/null
timeout 80 ./build/bench/sparkglm-runner-bench --device cuda --preset tinyglm --weight-format fp4-local \
  --cells decode_c1,decode_c4,decode_c8,prefill_8k --runs 2 --max-seconds 60 --out $R/rb-g2-tinyglm-fp4.json \
  > $R/rb-g2-tinyglm-fp4.log 2>&1; echo "tinyglm fp4 rc=$?"; cp $R/rb-g2-tinyglm-fp4.* $OUT/ 2>/dev/null
