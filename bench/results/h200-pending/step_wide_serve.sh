# Issues 18 and 19 on the H200, after step_train_wide.sh wrote $R/wide on the same machine: the CUDA
# backend serves tinyglm-wide (its first GPU run at 16 MLA heads of 64 and top-k 64), the quality
# gate through it, then speculation at k = 0..3 with its chain-trained MTP module. Score and bundle:
# `sparkglm-qualify quality --device cuda` writes its own bundle; `measure --speculation-bench` on
# the bench files.
R=$1; M=$R/wide; P=tinyglm/weights/tinyglm-micro-trained/heldout.json
[ -f $M/training.json ] || { echo "no $M: run train_wide first"; exit 1; }
timeout 200 ./build/sparkglm-qualify quality --device cuda --checkpoint $M --out $R/quality-wide-cuda \
  > $R/quality-wide-cuda.log 2>&1; echo "quality rc=$?"; grep -E "quality gate|verifies" $R/quality-wide-cuda.log
for i in 1 2; do
  timeout 90 ./build/bench/speculation_bench --device cuda --model $M --prompts $P --k 0,1,2,3 \
    --concurrency 1,4,8 --max-tokens 128 --reps 3 > $R/spec-wide-$i.json 2> $R/spec-wide-$i.log
  echo "spec $i rc=$?"
done
