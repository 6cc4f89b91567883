# Written in session 37 (not run: no device time was left). The tree is HEAD plus
# resume-kernel.patch (a verify step's KDA record resumes in one launch, state_records.h, where
# they were one cudaMemcpy2DAsync a sequence and array, ahead of the step's graph: the device's
# ~21 us wait at each C1 verify step's start, `lag_us`, holds those copies). Copy this file,
# ../h200-2026-12-02/dev.sh, variant.sh and both patches into .devroot/ with the debs, `git apply`
# resume-kernel.patch, then `bash .devroot/dev.sh 585 build resume`. (1) the new test, the
# speculation suites and their mutation (resume-kernel-mutation.patch must fail
# CudaStateRecords.*) while the base (the patch reversed) builds; (2) G2's cells, tree and base
# alternated, two runs each: lag_us should fall at C1 and C4, hashes equal k = 0's; merge only on
# a measured gain.
R=$1
source .devroot/variant.sh
T0=$(date +%s); el() { echo "+$(( $(date +%s) - T0 ))s"; }
(build_variant /tmp/base resume-kernel.patch -R speculation_bench; echo "base built rc=$? $(el)") > $R/base-bg.log 2>&1 &
./build/tests/sparkglm_cuda_tests --gtest_filter='CudaStateRecords.*:*CudaSpeculation*:*CudaStepPipeline*' \
  --gtest_output=json:$R/tests.json > $R/tests.log 2>&1
echo "tree tests rc=$? $(el)"; grep -E "^\[  (PASSED|FAILED|SKIPPED) +\]|FAILED  \]" $R/tests.log | head -20
wait; cat $R/base-bg.log
(build_variant /tmp/mut resume-kernel-mutation.patch sparkglm_cuda_tests && /tmp/mut/build/tests/sparkglm_cuda_tests \
  --gtest_filter='CudaStateRecords.*' > $R/mut.log 2>&1; echo "mutation rc=$? (must be 1) $(el)") &
while [ ! -f /tmp/R/pre-d.done ]; do sleep 2; done; echo "run D trained $(el)"; cat $R/pre-d.log
[ -f out/mtp-onpolicy-d/training.json ] && tar czf $R/mtp-onpolicy-d.tgz out/mtp-onpolicy-d
g2_cells ab 2 tree=. base=/tmp/base
wait
