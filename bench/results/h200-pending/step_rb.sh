# Session 31, call 2 (after step_split.sh): the tinyglm BF16 and glm-5.3-flash fp4-local (8 layers)
# runner benches alternated twice between the tree (all three patches) and /tmp/base (none).
R=$1
for i in 1 2; do for v in all=. base=/tmp/base; do
  name=${v%%=*} dir=${v#*=}
  timeout 60 "$dir/build/bench/sparkglm-runner-bench" --device cuda --preset tinyglm \
    --cells decode_c1,decode_c4 --runs 2 --gpu-memory-utilization 0.5 --out "$R/rb-tinyglm-$name-$i.json" \
    > "$R/rb-tinyglm-$name-$i.log" 2>&1
  echo "rb tinyglm $name $i rc=$?"
done; done
for i in 1 2; do for v in all=. base=/tmp/base; do
  name=${v%%=*} dir=${v#*=}
  timeout 90 "$dir/build/bench/sparkglm-runner-bench" --device cuda --preset glm-5.3-flash --num-layers 8 \
    --weight-format fp4-local --cells decode_c1,decode_c4 --runs 2 --gpu-memory-utilization 0.5 \
    --out "$R/rb-glm8-$name-$i.json" > "$R/rb-glm8-$name-$i.log" 2>&1
  echo "rb glm8 $name $i rc=$?"
done; done
