# Session 28: the verify step pipelined (commit from the main rows, submit the next step while
# the MTP passes run). HEAD rebuilt in /tmp/base (the tree's change reversed), then
# speculation_bench alternated five times between the tree and the base.
R=$1
source .devroot/variant.sh
build_variant /tmp/base pipelined-verify.patch -R speculation_bench || exit 1
alternate_bench pipe-bench pipe=. base=/tmp/base
