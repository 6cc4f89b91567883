# Session 26, call 4 (fresh machine): build the tree from source, then step_draft_times.sh.
set -u
cp bench/results/device-2026-12-06-s26/step_draft_times.sh .devroot/step_dt.sh
bash .devroot/dev.sh 590 build dt
echo "== dt"; tail -30 /tmp/R/dt.log 2>/dev/null
