# Session 25, call 5 (warm machine of call 4), as it ran (one command line): two more rounds of
# HEAD against the grouped GEMV, then --waves 8 once each (stdout and stderr in one file; the
# per-cell lines are kept as hwaves-*.jsonl).
R=/tmp/R; W=/tmp/head; M=tinyglm/weights/tinyglm-micro-trained-mtp-chain; P=tinyglm/weights/tinyglm-micro-trained/heldout.json
for i in 4 5; do for v in head group; do B=./build/bench/speculation_bench; [ $v = head ] && B=$W/build/bench/speculation_bench; timeout 30 $B --device cuda --model $M --prompts $P --k 0,2,3 --concurrency 1,4 --max-tokens 128 --reps 3 > $R/hb-$v-$i.json 2> $R/hb-$v-$i.log; echo "$v $i rc=$?"; done; done
for v in head group; do B=./build/bench/speculation_bench; [ $v = head ] && B=$W/build/bench/speculation_bench; timeout 30 $B --device cuda --model $M --prompts $P --k 0,1,2,3 --concurrency 1 --waves 8 --max-tokens 128 --reps 3 > $R/hwaves-$v.json 2>&1; echo "waves $v rc=$?"; done
tar czf $OUT/results5.tgz -C /tmp R
