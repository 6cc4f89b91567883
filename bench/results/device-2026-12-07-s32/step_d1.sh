# Session 32: the D1 mend (tests/cuda/moe_decode_workspace.h shared by the MoE decode tests)
# applied on the built tree, the cuda test binary rebuilt, the three changed tests' suites run.
R=$1
git apply .devroot/d1.patch || { echo "PATCH-FAILED d1"; exit 1; }
cmake --build build -j 16 --target sparkglm_cuda_tests > $R/d1-build.log 2>&1; echo "d1 build rc=$?"
./build/tests/sparkglm_cuda_tests --gtest_filter='CudaMoeQuant.*:SparkMoe.*:CudaMoeSharedBeside.*' > $R/d1-tests.log 2>&1
echo "d1 tests rc=$?"; grep -E "^\[  (PASSED|FAILED)|tests ran" $R/d1-tests.log | head -8
git apply -R .devroot/d1.patch
