# Session 29, call 1 (after build and every CUDA test of the tree: HEAD + idle-time.patch +
# pdl.patch): the PDL probe, then the tree's speculation_bench alternated with the tree less
# pdl.patch (/tmp/base), three runs each.
R=$1
NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
$NVCC -O2 -arch=sm_90a -o /tmp/pdl_probe .devroot/probe/pdl_probe.cu && /tmp/pdl_probe > $R/pdl-probe.txt 2>&1
cat $R/pdl-probe.txt
source .devroot/variant.sh
build_variant /tmp/base pdl.patch -R speculation_bench || exit 1
M=tinyglm/weights/tinyglm-micro-trained-mtp-chain; P=tinyglm/weights/tinyglm-micro-trained/heldout.json
for i in 1 2 3; do for v in pdl=. base=/tmp/base; do
  name=${v%%=*} dir=${v#*=}
  timeout 40 "$dir/build/bench/speculation_bench" --device cuda --model $M --prompts $P --k 0,2,3 \
    --concurrency 1,4 --max-tokens 128 --reps 3 > "$R/ab-$name-$i.json" 2> "$R/ab-$name-$i.log"
  echo "$name $i rc=$?"
done; done
cp $R/pdl-probe.txt $R/ab-*.json $OUT/ 2>/dev/null
