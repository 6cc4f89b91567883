# The next session's second device call, on next_call.sh's warm machine: chains in steps of
# several slices at C4 and C8 (step_chain_slices.sh, copied into .devroot/ as step_cs.sh).
set -u
cp .devroot/step_chain_slices.sh .devroot/step_cs.sh 2>/dev/null
bash .devroot/dev.sh 300 cs
echo "== cs"; tail -10 /tmp/R/cs.log 2>/dev/null
