# Written in session 29, not run: the A/B of select-rank.patch and chain-z-in-place.patch, as
# session 29 ran PDL's. Before the call: `git apply` both patches to the tree, then
# `cat select-rank.patch chain-z-in-place.patch > .devroot/cuts.patch` and copy variant.sh and
# this file (as step_cuts.sh) into .devroot/. Run `bash .devroot/dev.sh 570 build cuda_tests cuts`:
# every CUDA test on the patched tree, then the tree less the patches rebuilt in /tmp/base and
# speculation_bench alternated five times (variant.sh's alternate_bench; about 520 s on a fresh H100).
R=$1
source .devroot/variant.sh
build_variant /tmp/base cuts.patch -R speculation_bench || exit 1
alternate_bench cuts-bench cuts=. base=/tmp/base
