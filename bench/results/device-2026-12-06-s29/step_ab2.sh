# Session 29, call 2 (after build and every CUDA test of the tree: PDL over the whole decode path):
# the tree alternated with the tree less every PDL change (/tmp/nopdl): speculation_bench on the
# chain-trained micro (C1, C4; k = 0, 2, 3), three runs each, then the runner bench's tinyglm BF16
# decode (C1, C4) twice each.
R=$1
source .devroot/variant.sh
build_variant /tmp/nopdl pdl-all.patch -R speculation_bench sparkglm-runner-bench || exit 1
M=tinyglm/weights/tinyglm-micro-trained-mtp-chain; P=tinyglm/weights/tinyglm-micro-trained/heldout.json
for i in 1 2 3; do for v in pdl=. nopdl=/tmp/nopdl; do
  name=${v%%=*} dir=${v#*=}
  timeout 40 "$dir/build/bench/speculation_bench" --device cuda --model $M --prompts $P --k 0,2,3 \
    --concurrency 1,4 --max-tokens 128 --reps 3 > "$R/ab2-$name-$i.json" 2> "$R/ab2-$name-$i.log"
  echo "$name $i rc=$?"
done; done
cp $R/ab2-*.json $OUT/ 2>/dev/null
for i in 1 2; do for v in pdl=. nopdl=/tmp/nopdl; do
  name=${v%%=*} dir=${v#*=}
  timeout 60 "$dir/build/bench/sparkglm-runner-bench" --device cuda --preset tinyglm \
    --cells decode_c1,decode_c4 --runs 2 --gpu-memory-utilization 0.5 --out "$R/rb-$name-$i.json" \
    > "$R/rb-$name-$i.log" 2>&1
  echo "rb $name $i rc=$?"
  cp "$R/rb-$name-$i.json" $OUT/ 2>/dev/null
done; done
