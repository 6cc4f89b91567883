# The device's timeline of C1 steps at k = 0 and k = 2 (nsys, CUDA kernels and copies): how long the
# GPU sits idle between a verify step's last copy and the next step's first launch (the host's
# round trip, which decode steps hide by pipelining). gpu_gaps.py reads the traces.
R=$1
NSYS=$(command -v nsys || ls /usr/local/cuda/bin/nsys /opt/nvidia/nsight-systems/*/bin/nsys 2>/dev/null | head -1)
[ -n "$NSYS" ] || { echo "no nsys on this machine"; exit 1; }
M=tinyglm/weights/tinyglm-micro-trained-mtp-chain; P=tinyglm/weights/tinyglm-micro-trained/heldout.json
for k in 0 2; do
  timeout 90 $NSYS profile -t cuda --cuda-graph-trace=node -o /tmp/tl-k$k -f true \
    ./build/bench/speculation_bench --device cuda --model $M --prompts $P --k $k --concurrency 1 \
    --max-tokens 128 --reps 1 > $R/tl-k$k.log 2>&1; echo "nsys k=$k rc=$?"
  timeout 60 $NSYS stats --report cuda_gpu_trace --format csv -o /tmp/tl-k$k /tmp/tl-k$k.nsys-rep >> $R/tl-k$k.log 2>&1
  gzip -c /tmp/tl-k${k}_cuda_gpu_trace.csv > $R/tl-k$k.csv.gz 2>/dev/null || ls /tmp/tl-k$k*
  python3 bench/results/h200-pending/gpu_gaps.py $R/tl-k$k.csv.gz | tee -a $R/tl-gaps.txt
done
