# Session 27's second device visit (ran from ../h200-pending/ with the tree holding the split:
# split-chain.patch here is that change against 9ac4734, tests included; the step reversed only
# its engine and bench part): build the tree from source, every CUDA test on it, then
# step_split_chain.sh (base rebuilt, A/B, all prompts).
set -u
P=bench/results/h200-pending
cp $P/split-chain.patch $P/variant.sh .devroot/
cp $P/step_split_chain.sh .devroot/step_split.sh
rm -f .devroot/step_gl*.sh
bash .devroot/dev.sh 590 build cuda_tests split
grep -E "^\[  (PASSED|FAILED)|FAILED  \]" /tmp/R/cuda_tests.log 2>/dev/null | head -20
grep -E "lag_us|chain_graph" /tmp/R/cuda_tests.log | head -3
tail -14 /tmp/R/split.log 2>/dev/null
