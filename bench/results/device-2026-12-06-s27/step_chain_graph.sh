# Session 27: the chain's passes as a graph of their own, launched right after the verify step's
# (chain-graph.patch, which the tree holds; planned before the step as before, the chain key
# holding the verify step's rows). The speculation, served-model and graph CUDA tests on the
# tree, then HEAD rebuilt in /tmp/base (the patch reversed) and speculation_bench alternated
# five times between the two. Run by call4.sh.
R=$1
timeout 150 ./build/tests/sparkglm_cuda_tests --gtest_filter='*Speculation*:ServedModels/*:*Graph*' \
  > $R/cg-tests.log 2>&1; echo "tests rc=$?"
grep -E "^\[  (PASSED|FAILED)|FAILED  \]" $R/cg-tests.log | head -20
source .devroot/variant.sh
build_variant /tmp/base chain-graph.patch -R speculation_bench || exit 1
alternate_bench cg-bench graph=. base=/tmp/base
