R=$1; W=/tmp/pdl
[ -x $W/build/bench/sparkglm-runner-bench ] || { echo "pdl not built"; exit 1; }
for i in 1 2; do
  for v in main pdl; do
    B=./build/bench/sparkglm-runner-bench; [ $v = pdl ] && B=$W/build/bench/sparkglm-runner-bench
    timeout 60 $B --device cuda --preset tinyglm --cells decode_c1,decode_c4,decode_c8 --runs 2 \
      --gpu-memory-utilization 0.5 --out $R/rb-tinyglm-bf16-$v-$i.json > $R/rb-tinyglm-$v-$i.log 2>&1; echo "tinyglm $v $i rc=$?"
    timeout 100 $B --device cuda --preset glm-5.3-flash --num-layers 28 --weight-format fp4-local \
      --cells decode_c1,decode_c4,decode_c8 --runs 2 --max-seconds 80 --out $R/rb-glm28-fp4-$v-$i.json > $R/rb-glm28-$v-$i.log 2>&1; echo "glm28 $v $i rc=$?"
  done
done
