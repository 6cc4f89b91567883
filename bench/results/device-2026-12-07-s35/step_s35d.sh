# Session 35 call 4 (HEAD, built by ci/build.sh): Nsight Compute over 700 kernels of C1 k = 0 and
# of C1 k = 2 on the distilled micro (warm caches, clocks left alone), for the kernel-by-kernel
# cost of a verify step at this tree; then the runner bench's tinyglm BF16 decode cells (issue 15).
R=$1
T0=$(date +%s); el() { echo "+$(( $(date +%s) - T0 ))s"; }
M=tinyglm/weights/tinyglm-micro-trained-mtp-distill P=tinyglm/weights/tinyglm-micro-trained/heldout.json
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1); echo "ncu=$NCU"
for k in 0 2; do
  timeout 100 $NCU --clock-control none --cache-control none --metrics gpu__time_duration.sum --csv \
    --launch-skip 3000 --launch-count 700 ./build/bench/speculation_bench --device cuda --model $M \
    --prompts $P --k $k --concurrency 1 --max-tokens 96 --reps 1 > $R/ncu-k$k.csv 2> $R/ncu-k$k.log
  echo "ncu k=$k rc=$? $(el)"; gzip -f $R/ncu-k$k.csv
done
cp $R/ncu-k*.csv.gz $OUT/
timeout 90 ./build/bench/sparkglm-runner-bench --device cuda --preset tinyglm --weight-format bf16 \
  --cells decode_c1,decode_c4,decode_c8 --runs 2 --max-seconds 60 --out $R/rb-tinyglm-bf16.json > $R/rb.log 2>&1
echo "rb rc=$? $(el)"; tail -12 $R/rb.log; cp $R/rb-tinyglm-bf16.json $OUT/
