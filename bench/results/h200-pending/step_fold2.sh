# Session 30, call 4 (warm, after step_fold.sh): the tinyglm BF16 runner bench alternated twice
# against /tmp/base; the mutation check (mhc-fold-mutation.patch: the folded norm's eps doubled, the folded
# post's comb transposed; the CUDA tests rebuilt, CudaMhc must fail; the patch reversed); then
# glm-5.3-flash fp4-local (8 layers) alternated twice.
R=$1
for i in 1 2; do for v in fold=. base=/tmp/base; do
  name=${v%%=*} dir=${v#*=}
  timeout 60 "$dir/build/bench/sparkglm-runner-bench" --device cuda --preset tinyglm \
    --cells decode_c1,decode_c4 --runs 2 --gpu-memory-utilization 0.5 --out "$R/rb-tinyglm-$name-$i.json" \
    > "$R/rb-tinyglm-$name-$i.log" 2>&1
  echo "rb $name $i rc=$?"
done; done
git apply .devroot/mhc-fold-mutation.patch && cmake --build build -j 16 --target sparkglm_cuda_tests > $R/mut-build.log 2>&1
./build/tests/sparkglm_cuda_tests --gtest_filter='CudaMhc.*' > $R/mut-tests.log 2>&1
echo "mutated mhc tests rc=$? (must be nonzero)"; grep -E "^\[  (PASSED|FAILED)" $R/mut-tests.log | head -6
git apply -R .devroot/mhc-fold-mutation.patch
for i in 1 2; do for v in fold=. base=/tmp/base; do
  name=${v%%=*} dir=${v#*=}
  timeout 90 "$dir/build/bench/sparkglm-runner-bench" --device cuda --preset glm-5.3-flash --num-layers 8 \
    --weight-format fp4-local --cells decode_c1,decode_c4 --runs 2 --gpu-memory-utilization 0.5 \
    --out "$R/rb-glm8-$name-$i.json" > "$R/rb-glm8-$name-$i.log" 2>&1
  echo "rb glm8 $name $i rc=$?"
done; done
