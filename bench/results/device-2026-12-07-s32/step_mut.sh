# Session 31 (after step_all.sh): the three mutation checks, each must fail its own test
# (beside-mutation.patch: CudaMoeSharedBeside; mla-rows-mutation.patch: CudaLatentStore;
# mhc-fold-mutation.patch: CudaMhc); then the tree rebuilt without them.
R=$1
for m in beside-mutation.patch:CudaMoeSharedBeside mla-rows-mutation.patch:CudaLatentStore mhc-fold-mutation.patch:CudaMhc; do
  p=${m%%:*} t=${m#*:}
  git apply .devroot/$p && cmake --build build -j 16 --target sparkglm_cuda_tests > $R/mut-$t-build.log 2>&1
  ./build/tests/sparkglm_cuda_tests --gtest_filter="$t.*" > $R/mut-$t-tests.log 2>&1
  echo "mutated $t tests rc=$? (must be nonzero)"; grep -E "^\[  (PASSED|FAILED)" $R/mut-$t-tests.log | head -6
  git apply -R .devroot/$p
done
cmake --build build -j 16 > $R/mut-rebuild.log 2>&1; echo "rebuilt after the mutations rc=$?"
