R=$1; T0=$(date +%s)
M=tinyglm/weights/tinyglm-micro-trained-mtp-onpolicy-1200 P=tinyglm/weights/tinyglm-micro-trained/heldout.json
timeout 90 ./build/tests/sparkglm_cuda_tests_mut --gtest_filter='*CudaSpeculationRollback*:*TheMtpInputOnGreedyPicks*' > $R/mut.log 2>&1
echo "mutation rc=$? (nonzero expected) +$(( $(date +%s) - T0 ))s"
grep -E "^\[  (PASSED|FAILED) +\]|FAILED  \]" $R/mut.log | head -12
for i in 4 5 6 7 8; do for b in base ngb conv fold2 allfold2; do
  timeout 45 ./build/bench/speculation_bench_$b --device cuda --model $M --prompts $P --k 0,3 --concurrency 1,4 --waves 8 --max-tokens 128 --reps 3 > $R/g2-$b-$i.json 2> $R/g2-$b-$i.log; echo "$b $i rc=$?"
done; done
echo "benches +$(( $(date +%s) - T0 ))s"
rm -rf build
bash .devroot/dev.sh 330 build
tail -3 $R/build.log
if [ -x build/tests/sparkglm_cuda_tests ]; then
  timeout 60 ./build/tests/sparkglm_cuda_tests --gtest_filter='*CudaNorms*:*CudaSpeculationRollback*:*CudaSpeculationVerify*' > $R/src-tests.log 2>&1
  echo "source-built tests rc=$? +$(( $(date +%s) - T0 ))s"; grep -E "^\[  (PASSED|FAILED|SKIPPED) +\]|FAILED  \]" $R/src-tests.log | head
fi
