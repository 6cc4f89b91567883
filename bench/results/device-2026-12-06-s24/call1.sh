# Session 24, call 1: build at HEAD and the patch beside it, their key tests, the bench alternated, ncu.
set -u
bash .devroot/dev.sh 585 build vs_build t0 vs_tests vs_bench ncu
for f in t0 vs_build vs_tests vs_bench ncu; do echo "== $f"; tail -22 /tmp/R/$f.log 2>/dev/null; done
