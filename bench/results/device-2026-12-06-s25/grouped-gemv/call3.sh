# Session 25, call 3: the grouped GEMV (working tree) built from source with ci/build.sh, every CUDA
# test there, the baseline (HEAD) beside it, the bench alternated, ncu of the steps.
set -u
bash .devroot/dev.sh 590 build basebuild ctests abbench ncu0
for f in basebuild ctests abbench ncu0; do echo "== $f"; tail -25 /tmp/R/$f.log 2>/dev/null; done
