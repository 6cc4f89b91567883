export LD_LIBRARY_PATH=/tmp/rt:${LD_LIBRARY_PATH:-} SPARKGLM_SOURCE_DIR=$PWD
xz -dc .devbin2/sparkglm_cuda_tests_mut.xz > build/tests/sparkglm_cuda_tests_mut; chmod +x build/tests/sparkglm_cuda_tests_mut
ls build/bench
bash .devbin2/step.sh /tmp/R 2>&1 | tee $OUT/step2.log
tar czf $OUT/r2.tgz -C /tmp R
