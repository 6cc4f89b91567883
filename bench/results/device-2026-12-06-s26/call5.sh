# Session 26, call 5 (fresh machine): build the tree from source, then step_segment_copy.sh.
set -u
cp bench/results/device-2026-12-06-s26/step_segment_copy.sh .devroot/step_sc.sh
bash .devroot/dev.sh 590 build sc
echo "== sc"; tail -32 /tmp/R/sc.log 2>/dev/null
