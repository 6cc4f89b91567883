# After pre_d.sh (started in the background before the build): wait for run D, bring it back, then
# G2's cells for C (the committed G2 checkpoint) and D alternated, two runs each, on the tree's
# build. D replaces C only if its C1 k = 3 cells are faster in both runs with hashes equal k = 0's.
R=$1
T0=$(date +%s); el() { echo "+$(( $(date +%s) - T0 ))s"; }
while [ ! -f /tmp/R/pre-d.done ]; do sleep 2; done; cat /tmp/R/pre-d.log; echo "waited $(el)"
[ -f out/mtp-onpolicy-d/training.json ] && tar czf $OUT/mtp-onpolicy-d.tgz out/mtp-onpolicy-d
P=tinyglm/weights/tinyglm-micro-trained/heldout.json
for i in 1 2; do for v in c=tinyglm/weights/tinyglm-micro-trained-mtp-onpolicy d=out/mtp-onpolicy-d; do
  n=${v%%=*} m=${v#*=}; [ -f $m/config.json ] || continue
  timeout 60 ./build/bench/speculation_bench --device cuda --model $m --prompts $P --k 0,2,3 --concurrency 1,4 \
    --waves 8 --max-tokens 128 --reps 3 > $R/d-$n-$i.json 2> $R/d-$n-$i.log; echo "$n $i rc=$? $(el)"
  python3 - $R/d-$n-$i.json <<'PY'
import json, sys
for c in json.load(open(sys.argv[1]))["cells"]:
    t = c["draft_step_time"]
    print("  C%d k%d %.0f tok/s tps/step %.3f %s run %.1f main %.1f lag %.1f" % (c["concurrency"], c["k"],
          c["median_decode_tok_s"], c["tokens_per_verify_step"], c["output_sha256"][:8], t["run_us"], t["main_us"], t["lag_us"]))
PY
done; done
