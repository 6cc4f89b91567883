# Ran from ../h200-pending/ (its steps and patches moved here after the call; set P to this
# folder to run it again).
# Session 27's third device visit: build the tree (lag timing, CUDA engine faults, the chain
# test's short-first run; uncommitted) from source, every CUDA test on it, the bench with the
# lag, then the mutation check of the chain test. About 150 + 200 + 50 + 120 s: run again on
# the warm machine if a step is left.
set -u
P=bench/results/h200-pending
cp $P/mutation-split-chain.patch $P/variant.sh .devroot/
cp $P/step_lag_bench.sh .devroot/step_lagbench.sh
cp $P/step_mutation_split.sh .devroot/step_mut.sh
rm -f .devroot/step_gl*.sh .devroot/step_split.sh
bash .devroot/dev.sh 590 build cuda_tests lagbench mut
grep -E "^\[  (PASSED|FAILED)|FAILED  \]" /tmp/R/cuda_tests.log 2>/dev/null | head -20
tail -4 /tmp/R/lagbench.log 2>/dev/null
tail -20 /tmp/R/mut.log 2>/dev/null
