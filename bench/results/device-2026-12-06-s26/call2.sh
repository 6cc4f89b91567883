# The next session's second device call, on next_call.sh's warm machine (its build): the verify
# step's timeline under nsys (step_verify_timeline.sh) and chains in steps of several slices at C4
# and C8 (step_chain_slices.sh), copied into .devroot/ as step_timeline.sh and step_cs.sh.
set -u
cp .devroot/step_verify_timeline.sh .devroot/step_timeline.sh 2>/dev/null
cp .devroot/step_chain_slices.sh .devroot/step_cs.sh 2>/dev/null
bash .devroot/dev.sh 400 timeline cs
for f in timeline cs; do echo "== $f"; tail -12 /tmp/R/$f.log 2>/dev/null; done
