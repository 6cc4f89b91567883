# Session 31, call 1: the tree holds mhc-fold.patch (session 30), mla-rows.patch and
# beside.patch (this session); all.patch is the three against HEAD. Their own tests first, then
# the tree less all three (all.patch reversed) rebuilt in /tmp/base and speculation_bench
# alternated five times (variant.sh).
R=$1
source .devroot/variant.sh
./build/tests/sparkglm_cuda_tests --gtest_filter='CudaMhc.*:CudaNorms.*:CudaLatentStore.*:CudaMoeSharedBeside.*' > $R/all-tests.log 2>&1
echo "mhc, norm, latent store and shared-beside tests rc=$?"; grep -E "^\[  (PASSED|FAILED)" $R/all-tests.log | head -8
build_variant /tmp/base all.patch -R speculation_bench sparkglm-runner-bench || exit 1
alternate_bench all-bench all=. base=/tmp/base
