# Session 25: wait for the patched builds, then their key tests (select, verify bits, rollback, chains, KDA).
R=$1
for i in $(seq 1 150); do [ -e /tmp/sel.built ] && [ -e /tmp/both.built ] && break; sleep 2; done
cat $R/pbuild.txt; for n in sel both; do [ -e /tmp/$n.built ] || tail -30 $R/$n-build.log; done
for n in sel both; do
  [ -x /tmp/$n/build/tests/sparkglm_cuda_tests ] || continue
  timeout 100 /tmp/$n/build/tests/sparkglm_cuda_tests --gtest_filter='*Dsa*:*Select*:*Indexer*:*Verify*:*Rollback*:*Specul*:*Kda*:*Batch*' > $R/$n-key-tests.log 2>&1
  echo "$n key tests rc=$?"; grep -E "^\[  (PASSED|FAILED)|FAILED  \]|tests ran" $R/$n-key-tests.log | head -20
done
