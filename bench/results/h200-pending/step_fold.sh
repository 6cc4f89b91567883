# Session 30, call 3: mHC's folded launches (HcFold). The fold and norm tests, then the tree less
# the change (mhc-fold.patch reversed) rebuilt in /tmp/base; speculation_bench alternated five times
# (variant.sh).
R=$1
source .devroot/variant.sh
./build/tests/sparkglm_cuda_tests --gtest_filter='CudaMhc.*:CudaNorms.*' > $R/mhc-tests.log 2>&1
echo "mhc tests rc=$?"; grep -E "PASSED|FAILED" $R/mhc-tests.log | tail -4
build_variant /tmp/base mhc-fold.patch -R speculation_bench sparkglm-runner-bench || exit 1
alternate_bench fold-bench fold=. base=/tmp/base
